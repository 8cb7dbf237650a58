package kubelet

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
)

// containerEnv resolves the container's environment as upstream does:
// service links first, then envFrom, then env (later entries win), with
// $(VAR) references to earlier variables expanded.
func (k *Kubelet) containerEnv(ctx context.Context, pod *corev1.Pod, c *corev1.Container, podIP string) ([]string, error) {
	vars := map[string]string{}
	var order []string
	set := func(name, value string) {
		if _, ok := vars[name]; !ok {
			order = append(order, name)
		}
		vars[name] = value
	}
	for _, kv := range k.serviceEnv(pod) {
		set(kv[0], kv[1])
	}
	for _, from := range c.EnvFrom {
		data, err := k.envSource(ctx, pod, from)
		if err != nil {
			return nil, err
		}
		keys := make([]string, 0, len(data))
		for key := range data {
			keys = append(keys, key)
		}
		sort.Strings(keys)
		for _, key := range keys {
			set(from.Prefix+key, data[key])
		}
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			set(e.Name, expand(e.Value, vars))
			continue
		}
		v, ok, err := k.envValueFrom(ctx, pod, c, e.ValueFrom, podIP)
		if err != nil {
			return nil, fmt.Errorf("env %s: %w", e.Name, err)
		}
		if ok {
			set(e.Name, v)
		}
	}
	out := make([]string, 0, len(order))
	for _, name := range order {
		out = append(out, name+"="+vars[name])
	}
	return out, nil
}

func (k *Kubelet) envSource(ctx context.Context, pod *corev1.Pod, from corev1.EnvFromSource) (map[string]string, error) {
	switch {
	case from.ConfigMapRef != nil:
		cm, err := k.configMap(ctx, pod, from.ConfigMapRef.Name)
		if err != nil {
			if apierrors.IsNotFound(err) && from.ConfigMapRef.Optional != nil && *from.ConfigMapRef.Optional {
				return nil, nil
			}
			return nil, readError("configmap", from.ConfigMapRef.Name, err)
		}
		return cm.Data, nil
	case from.SecretRef != nil:
		s, err := k.secret(ctx, pod, from.SecretRef.Name)
		if err != nil {
			if apierrors.IsNotFound(err) && from.SecretRef.Optional != nil && *from.SecretRef.Optional {
				return nil, nil
			}
			return nil, readError("secret", from.SecretRef.Name, err)
		}
		out := map[string]string{}
		for key, v := range s.Data {
			out[key] = string(v)
		}
		return out, nil
	}
	return nil, nil
}

// readError says why a Secret or ConfigMap could not be read: "not found",
// as upstream's kubelet says, or the API's answer.
func readError(kind, name string, err error) error {
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%s %q not found", kind, name)
	}
	return fmt.Errorf("%s %q: %v", kind, name, err)
}

func (k *Kubelet) envValueFrom(ctx context.Context, pod *corev1.Pod, c *corev1.Container, src *corev1.EnvVarSource, podIP string) (string, bool, error) {
	switch {
	case src.FieldRef != nil:
		v, err := k.fieldValue(pod, src.FieldRef.FieldPath, podIP)
		return v, err == nil, err
	case src.ResourceFieldRef != nil:
		v, err := k.resourceValue(pod, c, src.ResourceFieldRef)
		return v, err == nil, err
	case src.ConfigMapKeyRef != nil:
		ref := src.ConfigMapKeyRef
		optional := ref.Optional != nil && *ref.Optional
		cm, err := k.configMap(ctx, pod, ref.Name)
		if err != nil {
			if optional && apierrors.IsNotFound(err) {
				return "", false, nil
			}
			return "", false, readError("configmap", ref.Name, err)
		}
		v, ok := cm.Data[ref.Key]
		if !ok && !optional {
			return "", false, fmt.Errorf("couldn't find key %s in ConfigMap %s/%s", ref.Key, pod.Namespace, ref.Name)
		}
		return v, ok, nil
	case src.SecretKeyRef != nil:
		ref := src.SecretKeyRef
		optional := ref.Optional != nil && *ref.Optional
		s, err := k.secret(ctx, pod, ref.Name)
		if err != nil {
			if optional && apierrors.IsNotFound(err) {
				return "", false, nil
			}
			return "", false, readError("secret", ref.Name, err)
		}
		v, ok := s.Data[ref.Key]
		if !ok && !optional {
			return "", false, fmt.Errorf("couldn't find key %s in Secret %s/%s", ref.Key, pod.Namespace, ref.Name)
		}
		return string(v), ok, nil
	}
	return "", false, nil
}

// fieldValue answers the downward API's fieldRef paths.
func (k *Kubelet) fieldValue(pod *corev1.Pod, path, podIP string) (string, error) {
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.hostIP", "status.hostIPs":
		return k.cfg.NodeIP, nil
	case "status.podIP", "status.podIPs":
		return podIP, nil
	case "metadata.labels":
		return formatMap(pod.Labels), nil
	case "metadata.annotations":
		return formatMap(pod.Annotations), nil
	}
	for _, p := range []struct {
		prefix string
		m      map[string]string
	}{{"metadata.labels['", pod.Labels}, {"metadata.annotations['", pod.Annotations}} {
		if rest, ok := strings.CutPrefix(path, p.prefix); ok {
			return p.m[strings.TrimSuffix(rest, "']")], nil
		}
	}
	return "", fmt.Errorf("unsupported fieldPath %q", path)
}

// formatMap is the downward API's key="value" lines, sorted.
func formatMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for key := range m {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, key := range keys {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "%s=%q", key, m[key])
	}
	return b.String()
}

// resourceValue answers resourceFieldRef; an unset limit reads as the
// node's allocatable, as upstream.
func (k *Kubelet) resourceValue(pod *corev1.Pod, c *corev1.Container, ref *corev1.ResourceFieldSelector) (string, error) {
	if ref.ContainerName != "" {
		for i := range pod.Spec.Containers {
			if pod.Spec.Containers[i].Name == ref.ContainerName {
				c = &pod.Spec.Containers[i]
			}
		}
	}
	kind, name, ok := strings.Cut(ref.Resource, ".")
	if !ok {
		return "", fmt.Errorf("unsupported resource %q", ref.Resource)
	}
	list := c.Resources.Limits
	if kind == "requests" {
		list = c.Resources.Requests
	}
	q, ok := list[corev1.ResourceName(name)]
	if !ok {
		if kind == "requests" {
			return "0", nil
		}
		q = k.machine.Capacity()[corev1.ResourceName(name)]
	}
	divisor := ref.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	if name == "cpu" {
		return strconv.FormatInt(int64(math.Ceil(float64(q.MilliValue())/float64(divisor.MilliValue()))), 10), nil
	}
	return strconv.FormatInt(int64(math.Ceil(float64(q.Value())/float64(divisor.Value()))), 10), nil
}

// serviceEnv is the Docker-links-style variables of the Services the pod
// can see: those of its namespace when enableServiceLinks (the default),
// and always the kubernetes master Service.
func (k *Kubelet) serviceEnv(pod *corev1.Pod) [][2]string {
	var svcs []*corev1.Service
	if pod.Spec.EnableServiceLinks == nil || *pod.Spec.EnableServiceLinks {
		svcs, _ = k.services.Services(pod.Namespace).List(labels.Everything())
	}
	if pod.Namespace != "default" || (pod.Spec.EnableServiceLinks != nil && !*pod.Spec.EnableServiceLinks) {
		if master, err := k.services.Services("default").Get("kubernetes"); err == nil {
			svcs = append(svcs, master)
		}
	}
	sort.Slice(svcs, func(i, j int) bool { return svcs[i].Name < svcs[j].Name })
	var out [][2]string
	for _, s := range svcs {
		ip := s.Spec.ClusterIP
		if ip == "" || ip == corev1.ClusterIPNone || len(s.Spec.Ports) == 0 {
			continue
		}
		name := strings.ToUpper(strings.ReplaceAll(s.Name, "-", "_"))
		first := s.Spec.Ports[0]
		out = append(out, [2]string{name + "_SERVICE_HOST", ip}, [2]string{name + "_SERVICE_PORT", strconv.Itoa(int(first.Port))})
		for _, p := range s.Spec.Ports {
			if p.Name != "" {
				out = append(out, [2]string{name + "_SERVICE_PORT_" + strings.ToUpper(strings.ReplaceAll(p.Name, "-", "_")), strconv.Itoa(int(p.Port))})
			}
		}
		proto := strings.ToLower(string(first.Protocol))
		out = append(out, [2]string{name + "_PORT", fmt.Sprintf("%s://%s:%d", proto, ip, first.Port)})
		for _, p := range s.Spec.Ports {
			proto := strings.ToLower(string(p.Protocol))
			prefix := fmt.Sprintf("%s_PORT_%d_%s", name, p.Port, strings.ToUpper(proto))
			out = append(out,
				[2]string{prefix, fmt.Sprintf("%s://%s:%d", proto, ip, p.Port)},
				[2]string{prefix + "_PROTO", proto},
				[2]string{prefix + "_PORT", strconv.Itoa(int(p.Port))},
				[2]string{prefix + "_ADDR", ip})
		}
	}
	return out
}

// expand replaces $(VAR) with an earlier variable's value; $$ escapes, and
// unknown references stay as written, as upstream.
func expand(s string, vars map[string]string) string {
	return expandWith(s, func(name string) (string, bool) {
		v, ok := vars[name]
		return v, ok
	})
}

// subPathOf is a mount's subPath, or its subPathExpr expanded with the
// container's environment; as upstream's kubelet, a reference to a
// variable that is unset or empty is an error (the container is not
// created: CreateContainerConfigError until the pod changes), not a path.
func subPathOf(m corev1.VolumeMount, vars map[string]string) (string, error) {
	if m.SubPathExpr == "" {
		return m.SubPath, nil
	}
	var missing []string
	out := expandWith(m.SubPathExpr, func(name string) (string, bool) {
		v := vars[name]
		if v == "" && !slices.Contains(missing, name) {
			missing = append(missing, name)
		}
		return v, true
	})
	if len(missing) > 0 {
		sort.Strings(missing)
		return "", fmt.Errorf("subPathExpr %q: missing value for %s", m.SubPathExpr, strings.Join(missing, ", "))
	}
	return out, nil
}

// expandWith is expand over a lookup: a reference it does not know stays
// as written.
func expandWith(s string, lookup func(string) (string, bool)) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := lookup(name); ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}
