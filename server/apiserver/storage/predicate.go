package storage

import (
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
)

// AttrFunc returns the labels and the selectable fields of an object. Each
// resource declares its own fields (pods add spec.nodeName, status.phase...).
type AttrFunc func(obj runtime.Object) (labels.Set, fields.Set, error)

// Predicate selects objects by label and field selectors. A nil selector
// matches everything.
type Predicate struct {
	Label labels.Selector
	Field fields.Selector
	Attrs AttrFunc
}

// Empty reports whether the predicate matches every object.
func (p Predicate) Empty() bool {
	return (p.Label == nil || p.Label.Empty()) && (p.Field == nil || p.Field.Empty())
}

// Matches reports whether obj passes both selectors.
func (p Predicate) Matches(obj runtime.Object) bool {
	if p.Empty() || p.Attrs == nil {
		return true
	}
	ls, fs, err := p.Attrs(obj)
	if err != nil {
		return false
	}
	if p.Label != nil && !p.Label.Matches(ls) {
		return false
	}
	if p.Field != nil && !p.Field.Matches(fs) {
		return false
	}
	return true
}
