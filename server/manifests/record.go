package manifests

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// What each manifest applied is kept in the API, one ConfigMap per file in
// kube-system, so that a restarted server (or one whose directory changed
// while it was down) still knows what to prune. A ConfigMap rather than a
// Secret: it holds only object references and a hash, nothing secret, and
// `kubectl get/describe configmap` shows it, with the apply errors as
// Events on it. Not a custom resource as k3s's Addon: the record must work
// on a cluster that serves no CRDs, and before any is established.
const (
	recordNamespace = "kube-system"
	recordPrefix    = "kelp-manifest-"
	// recordLabel marks the records, so one list finds them all.
	recordLabel = "kelp.dev/manifest"
	// The record's keys.
	keyFile    = "file"
	keySHA256  = "sha256"
	keyObjects = "objects"
	keyError   = "error"
)

// ref names one object a manifest applied.
type ref struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
	// Created is true when the object did not exist before the manifest
	// first applied it. Only such objects are deleted when the manifest
	// drops them: a manifest that names kube-system, or an object an
	// administrator made, must not take it away when the file goes.
	Created bool `json:"created,omitempty"`
}

func refOf(o *unstructured.Unstructured) ref {
	return ref{APIVersion: o.GetAPIVersion(), Kind: o.GetKind(), Namespace: o.GetNamespace(), Name: o.GetName()}
}

// key identifies the object whatever version it was applied at.
func (r ref) key() string {
	gv, _ := schema.ParseGroupVersion(r.APIVersion)
	return gv.Group + "/" + r.Kind + "/" + r.Namespace + "/" + r.Name
}

func (r ref) String() string {
	if r.Namespace == "" {
		return r.Kind + " " + r.Name
	}
	return r.Kind + " " + r.Namespace + "/" + r.Name
}

// record is what the API holds for one manifest file.
type record struct {
	File    string
	SHA256  string // of the content last applied without error; "" after an error
	Objects []ref
	Error   string // the last pass's errors, for `kubectl get -o yaml`
}

// recordName is the ConfigMap's name for a file: the file name lowered,
// with what a name may not hold replaced, and a hash of the file name
// appended whenever that changed anything, so two files never share one.
func recordName(file string) string {
	var b strings.Builder
	for _, c := range strings.ToLower(file) {
		if (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' {
			b.WriteRune(c)
		} else {
			b.WriteByte('-')
		}
	}
	// Each dot-separated label starts and ends with a letter or digit.
	var labels []string
	for _, l := range strings.Split(b.String(), ".") {
		if l = strings.Trim(l, "-"); l != "" {
			labels = append(labels, l)
		}
	}
	name := strings.Join(labels, ".")
	if name == file && len(recordPrefix)+len(name) <= 253 {
		return recordPrefix + name
	}
	sum := sha256.Sum256([]byte(file))
	if max := 253 - len(recordPrefix) - 9; len(name) > max {
		name = strings.TrimRight(name[:max], "-.")
	}
	if name == "" {
		return recordPrefix + hex.EncodeToString(sum[:4])
	}
	return recordPrefix + name + "-" + hex.EncodeToString(sum[:4])
}

func (r *record) data() (map[string]string, error) {
	objs := r.Objects
	if objs == nil {
		objs = []ref{}
	}
	j, err := json.Marshal(objs)
	if err != nil {
		return nil, err
	}
	d := map[string]string{keyFile: r.File, keySHA256: r.SHA256, keyObjects: string(j)}
	if r.Error != "" {
		d[keyError] = r.Error
	}
	return d, nil
}

// recordFrom reads a record ConfigMap. One that does not parse yields an
// error, and the caller leaves its objects alone rather than guess.
func recordFrom(cm *corev1.ConfigMap) (*record, error) {
	r := &record{File: cm.Data[keyFile], SHA256: cm.Data[keySHA256], Error: cm.Data[keyError]}
	if r.File == "" {
		return nil, fmt.Errorf("configmap %s/%s: no %q", cm.Namespace, cm.Name, keyFile)
	}
	if s := cm.Data[keyObjects]; s != "" {
		if err := json.Unmarshal([]byte(s), &r.Objects); err != nil {
			return nil, fmt.Errorf("configmap %s/%s: %s: %w", cm.Namespace, cm.Name, keyObjects, err)
		}
	}
	return r, nil
}

// toPrune is what a manifest no longer holds: the refs of old whose key is
// not in keep, that the manifest created, and that no other manifest
// (others) still applies. keep and others are keyed by ref.key after the
// caller has normalised namespaces.
func toPrune(old []ref, keep, others map[string]bool) (prune, leave []ref) {
	for _, r := range old {
		switch k := r.key(); {
		case keep[k]:
		case others[k] || !r.Created:
			leave = append(leave, r)
		default:
			prune = append(prune, r)
		}
	}
	// Namespaced objects before cluster-scoped ones (a Namespace, a CRD),
	// so that deleting a namespace does not race its objects' deletion.
	sort.SliceStable(prune, func(i, j int) bool { return prune[i].Namespace != "" && prune[j].Namespace == "" })
	return prune, leave
}
