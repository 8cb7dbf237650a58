package admission

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

var limitRangesResource = corev1.SchemeGroupVersion.WithResource("limitranges")

// limitRangerAnnotation records on a pod which defaults the LimitRanges of
// its namespace set, as upstream's plugin does.
const limitRangerAnnotation = "kubernetes.io/limit-ranger"

// limitRanger is upstream's LimitRanger plugin. A new pod's containers get
// the requests and limits they leave out from the namespace's
// LimitRanges of type Container (default, defaultRequest); then each
// container, and the pod as a whole, must lie within their min and max
// and under their maxLimitRequestRatio, and a claim's storage request
// within those of type PersistentVolumeClaim. Pods are checked when they
// are created only, as upstream: their resources change afterwards only
// through a resize.
type limitRanger struct{ ranges ObjectGetter }

func (l limitRanger) limits(ctx context.Context, namespace string) ([]corev1.LimitRangeItem, error) {
	objs, err := l.ranges.List(ctx, namespace)
	if err != nil {
		return nil, err
	}
	var items []corev1.LimitRangeItem
	for _, o := range objs {
		if lr, ok := o.(*corev1.LimitRange); ok {
			items = append(items, lr.Spec.Limits...)
		}
	}
	return items, nil
}

func (l limitRanger) Admit(ctx context.Context, a *Attributes) error {
	pod, ok := rangedPod(a)
	if !ok {
		return nil
	}
	items, err := l.limits(ctx, a.Namespace)
	if err != nil {
		return apierrors.NewForbidden(a.Resource.GroupResource(), a.Name, err)
	}
	def := corev1.ResourceRequirements{Requests: corev1.ResourceList{}, Limits: corev1.ResourceList{}}
	for _, item := range items {
		if item.Type != corev1.LimitTypeContainer {
			continue
		}
		for name, q := range item.DefaultRequest {
			def.Requests[name] = q.DeepCopy()
		}
		for name, q := range item.Default {
			def.Limits[name] = q.DeepCopy()
		}
	}
	if len(def.Requests) == 0 && len(def.Limits) == 0 {
		return nil
	}
	var set []string
	for i := range pod.Spec.InitContainers {
		set = append(set, defaultResources(&pod.Spec.InitContainers[i], def, "init container")...)
	}
	for i := range pod.Spec.Containers {
		set = append(set, defaultResources(&pod.Spec.Containers[i], def, "container")...)
	}
	if len(set) > 0 {
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		pod.Annotations[limitRangerAnnotation] = "LimitRanger plugin set: " + strings.Join(set, "; ")
	}
	return nil
}

// defaultResources fills in what c leaves out of def, and says what it
// set ("cpu, memory request for container web").
func defaultResources(c *corev1.Container, def corev1.ResourceRequirements, what string) []string {
	fill := func(have *corev1.ResourceList, from corev1.ResourceList) []string {
		var set []string
		for name, q := range from {
			if _, ok := (*have)[name]; ok {
				continue
			}
			if *have == nil {
				*have = corev1.ResourceList{}
			}
			(*have)[name] = q.DeepCopy()
			set = append(set, string(name))
		}
		sort.Strings(set)
		return set
	}
	var out []string
	if set := fill(&c.Resources.Requests, def.Requests); len(set) > 0 {
		out = append(out, fmt.Sprintf("%s request for %s %s", strings.Join(set, ", "), what, c.Name))
	}
	if set := fill(&c.Resources.Limits, def.Limits); len(set) > 0 {
		out = append(out, fmt.Sprintf("%s limit for %s %s", strings.Join(set, ", "), what, c.Name))
	}
	return out
}

func (l limitRanger) Validate(ctx context.Context, a *Attributes) error {
	var check func(items []corev1.LimitRangeItem) []error
	if pod, ok := rangedPod(a); ok {
		check = func(items []corev1.LimitRangeItem) []error { return podWithinLimits(pod, items) }
	} else if pvc, ok := a.Object.(*corev1.PersistentVolumeClaim); ok && a.Resource.GroupResource() == pvcsResource && a.Subresource == "" &&
		(a.Operation == "CREATE" || a.Operation == "UPDATE") {
		check = func(items []corev1.LimitRangeItem) []error { return claimWithinLimits(pvc, items) }
	} else {
		return nil
	}
	items, err := l.limits(ctx, a.Namespace)
	if err != nil {
		return apierrors.NewForbidden(a.Resource.GroupResource(), a.Name, err)
	}
	if errs := check(items); len(errs) > 0 {
		return apierrors.NewForbidden(a.Resource.GroupResource(), a.Name, joinErrors(errs))
	}
	return nil
}

// joinErrors reads as upstream's aggregate: one error alone, several in
// brackets.
func joinErrors(errs []error) error {
	if len(errs) == 1 {
		return errs[0]
	}
	msgs := make([]string, len(errs))
	for i, err := range errs {
		msgs[i] = err.Error()
	}
	return errors.New("[" + strings.Join(msgs, ", ") + "]")
}

func podWithinLimits(pod *corev1.Pod, items []corev1.LimitRangeItem) []error {
	var errs []error
	for _, item := range items {
		switch item.Type {
		case corev1.LimitTypeContainer:
			for _, c := range append(append([]corev1.Container(nil), pod.Spec.InitContainers...), pod.Spec.Containers...) {
				errs = append(errs, withinItem(item, "Container", c.Resources.Requests, c.Resources.Limits)...)
			}
		case corev1.LimitTypePod:
			errs = append(errs, withinItem(item, "Pod", podTotal(pod, false), podTotal(pod, true))...)
		}
	}
	return errs
}

// podTotal is a pod's requests (or limits) as upstream's plugin adds them
// up: its containers' sum, or an init container's own if that is more.
func podTotal(pod *corev1.Pod, limits bool) corev1.ResourceList {
	of := func(c corev1.Container) corev1.ResourceList {
		if limits {
			return c.Resources.Limits
		}
		return c.Resources.Requests
	}
	total := corev1.ResourceList{}
	for _, c := range pod.Spec.Containers {
		for name, q := range of(c) {
			sum := total[name]
			sum.Add(q)
			total[name] = sum
		}
	}
	for _, c := range pod.Spec.InitContainers {
		for name, q := range of(c) {
			if cur, ok := total[name]; !ok || q.Cmp(cur) > 0 {
				total[name] = q.DeepCopy()
			}
		}
	}
	return total
}

func claimWithinLimits(pvc *corev1.PersistentVolumeClaim, items []corev1.LimitRangeItem) []error {
	var errs []error
	for _, item := range items {
		if item.Type != corev1.LimitTypePersistentVolumeClaim {
			continue
		}
		req, ok := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
		if q, has := item.Min[corev1.ResourceStorage]; has {
			if !ok {
				errs = append(errs, fmt.Errorf("minimum storage usage per PersistentVolumeClaim is %s.  No request is specified", q.String()))
			} else if req.Cmp(q) < 0 {
				errs = append(errs, fmt.Errorf("minimum storage usage per PersistentVolumeClaim is %s, but request is %s", q.String(), req.String()))
			}
		}
		if q, has := item.Max[corev1.ResourceStorage]; has && ok && req.Cmp(q) > 0 {
			errs = append(errs, fmt.Errorf("maximum storage usage per PersistentVolumeClaim is %s, but request is %s", q.String(), req.String()))
		}
	}
	return errs
}

// withinItem checks requests and limits against one item's min, max and
// maxLimitRequestRatio, with upstream's messages.
func withinItem(item corev1.LimitRangeItem, kind string, requests, limits corev1.ResourceList) []error {
	errs := outOfBound(item.Min, "minimum", -1, kind, requests, limits)
	errs = append(errs, outOfBound(item.Max, "maximum", 1, kind, requests, limits)...)
	for _, name := range sortedNames(item.MaxLimitRequestRatio) {
		ratio := item.MaxLimitRequestRatio[name]
		req, hasReq := requests[name]
		lim, hasLim := limits[name]
		switch {
		case !hasReq || req.IsZero():
			errs = append(errs, fmt.Errorf("%s max limit to request ratio per %s is %s, but no request is specified or request is 0", name, kind, ratio.String()))
		case !hasLim:
			errs = append(errs, fmt.Errorf("%s max limit to request ratio per %s is %s, but no limit is specified", name, kind, ratio.String()))
		default:
			if observed := lim.AsApproximateFloat64() / req.AsApproximateFloat64(); observed > ratio.AsApproximateFloat64() {
				errs = append(errs, fmt.Errorf("%s max limit to request ratio per %s is %s, but provided ratio is %f", name, kind, ratio.String(), observed))
			}
		}
	}
	return errs
}

// outOfBound checks requests and limits against one bound of an item: a
// minimum (breach -1: under it) wants a request, a maximum (breach 1:
// over it) a limit, and the other of the two, when given, must not
// breach it either.
func outOfBound(bound corev1.ResourceList, what string, breach int, kind string, requests, limits corev1.ResourceList) []error {
	wanted, wantedName, other, otherName := requests, "request", limits, "limit"
	if breach > 0 {
		wanted, wantedName, other, otherName = limits, "limit", requests, "request"
	}
	var errs []error
	for _, name := range sortedNames(bound) {
		b := bound[name]
		v, has := wanted[name]
		o, hasOther := other[name]
		switch {
		case !has:
			errs = append(errs, fmt.Errorf("%s %s usage per %s is %s.  No %s is specified", what, name, kind, b.String(), wantedName))
		case v.Cmp(b) == breach:
			errs = append(errs, fmt.Errorf("%s %s usage per %s is %s, but %s is %s", what, name, kind, b.String(), wantedName, v.String()))
		case hasOther && o.Cmp(b) == breach:
			errs = append(errs, fmt.Errorf("%s %s usage per %s is %s, but %s is %s", what, name, kind, b.String(), otherName, o.String()))
		}
	}
	return errs
}

func sortedNames(l corev1.ResourceList) []corev1.ResourceName {
	names := make([]corev1.ResourceName, 0, len(l))
	for name := range l {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool { return names[i] < names[j] })
	return names
}

// rangedPod returns the pod of a write LimitRanger judges: a pod's
// create, and, as upstream, a resize through pods/resize, whose new
// requests and limits must fit the namespace's ranges too.
func rangedPod(a *Attributes) (*corev1.Pod, bool) {
	if a.Operation == "UPDATE" && a.Resource.GroupResource() == podsResource.GroupResource() && a.Subresource == "resize" {
		p, ok := a.Object.(*corev1.Pod)
		return p, ok
	}
	return creatingPod(a)
}
