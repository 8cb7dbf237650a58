package printers

import (
	"strings"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The kinds of resource.k8s.io/v1, as upstream's printers.
func init() {
	cells([]metav1.TableColumnDefinition{nameColumn(), ageColumn()},
		func(c *resourcev1.DeviceClass, now time.Time) []interface{} {
			return []interface{}{c.Name, age(c.ObjectMeta, now)}
		})

	cells([]metav1.TableColumnDefinition{
		nameColumn(),
		column("State", "string", "A summary of the current state (allocated, pending, reserved, etc.)."),
		ageColumn(),
	}, func(c *resourcev1.ResourceClaim, now time.Time) []interface{} {
		return []interface{}{c.Name, resourceClaimState(c), age(c.ObjectMeta, now)}
	})

	cells([]metav1.TableColumnDefinition{nameColumn(), ageColumn()},
		func(t *resourcev1.ResourceClaimTemplate, now time.Time) []interface{} {
			return []interface{}{t.Name, age(t.ObjectMeta, now)}
		})

	sliceDoc := resourcev1.ResourceSliceSpec{}.SwaggerDoc()
	cells([]metav1.TableColumnDefinition{
		nameColumn(),
		column("Node", "string", sliceDoc["nodeName"]),
		column("Driver", "string", sliceDoc["driver"]),
		column("Pool", "string", resourcev1.ResourcePool{}.SwaggerDoc()["name"]),
		ageColumn(),
	}, func(s *resourcev1.ResourceSlice, now time.Time) []interface{} {
		return []interface{}{s.Name, deref(s.Spec.NodeName), s.Spec.Driver, s.Spec.Pool.Name, age(s.ObjectMeta, now)}
	})

	// The selector is not printed (it may be long, and is often empty);
	// the taint is.
	taintDoc := resourcev1.DeviceTaint{}.SwaggerDoc()
	cells([]metav1.TableColumnDefinition{
		nameColumn(),
		column("Key", "string", taintDoc["key"]),
		column("Value", "string", taintDoc["value"]),
		column("Effect", "string", taintDoc["effect"]),
		column("TimeAdded", "string", taintDoc["timeAdded"]),
		ageColumn(),
	}, func(r *resourcev1.DeviceTaintRule, now time.Time) []interface{} {
		added := ""
		if t := r.Spec.Taint.TimeAdded; t != nil {
			added = since(*t, now)
		}
		return []interface{}{r.Name, r.Spec.Taint.Key, r.Spec.Taint.Value, string(r.Spec.Taint.Effect), added, age(r.ObjectMeta, now)}
	})
}

// resourceClaimState is upstream's summary: deleted, pending, allocated,
// reserved.
func resourceClaimState(c *resourcev1.ResourceClaim) string {
	var states []string
	if c.DeletionTimestamp != nil {
		states = append(states, "deleted")
	}
	switch {
	case c.Status.Allocation != nil:
		states = append(states, "allocated")
		if len(c.Status.ReservedFor) > 0 {
			states = append(states, "reserved")
		}
	case c.DeletionTimestamp == nil:
		states = append(states, "pending")
	}
	return strings.Join(states, ",")
}
