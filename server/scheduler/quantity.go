package scheduler

import "k8s.io/apimachinery/pkg/api/resource"

func newMilli(v int64) *resource.Quantity { return resource.NewMilliQuantity(v, resource.DecimalSI) }
func newInt(v int64) *resource.Quantity   { return resource.NewQuantity(v, resource.BinarySI) }
