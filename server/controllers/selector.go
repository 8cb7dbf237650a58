package controllers

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Selects reports whether a controller's selector picks an object with
// these labels. An empty or invalid selector selects nothing: a controller
// must never adopt every object in its namespace.
func Selects(selector *metav1.LabelSelector, objLabels map[string]string) bool {
	sel, err := metav1.LabelSelectorAsSelector(selector)
	return err == nil && !sel.Empty() && sel.Matches(labels.Set(objLabels))
}

// Selecting returns the controllers among ctrls whose selector (read with
// selector) picks an object with these labels.
func Selecting[T any](ctrls []T, selector func(T) *metav1.LabelSelector, objLabels map[string]string) []T {
	var out []T
	for _, c := range ctrls {
		if Selects(selector(c), objLabels) {
			out = append(out, c)
		}
	}
	return out
}
