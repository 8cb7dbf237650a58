package validation

import (
	"fmt"
	"path"
	"reflect"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

const (
	// File modes in volume sources: upstream accepts 0..0777 (octal).
	maxFileMode      = 0o777
	fileModeErrorMsg = "must be a number between 0 and 0777 (octal), both inclusive"
)

var supportedHostPathTypes = []corev1.HostPathType{
	corev1.HostPathUnset, corev1.HostPathDirectoryOrCreate, corev1.HostPathDirectory, corev1.HostPathFileOrCreate,
	corev1.HostPathFile, corev1.HostPathSocket, corev1.HostPathCharDev, corev1.HostPathBlockDev,
}

// validateVolumes checks pod volumes and returns them by name so mounts can
// be resolved. Names are DNS labels and unique; each volume has exactly one
// source.
func validateVolumes(vols []corev1.Volume, fldPath *field.Path) (map[string]corev1.VolumeSource, field.ErrorList) {
	var allErrs field.ErrorList
	byName := map[string]corev1.VolumeSource{}
	for i := range vols {
		v := &vols[i]
		p := fldPath.Index(i)
		if v.Name == "" {
			allErrs = append(allErrs, field.Required(p.Child("name"), ""))
		} else {
			allErrs = append(allErrs, validateDNS1123Label(v.Name, p.Child("name"))...)
			if _, dup := byName[v.Name]; dup {
				allErrs = append(allErrs, field.Duplicate(p.Child("name"), v.Name))
			}
		}
		allErrs = append(allErrs, validateVolumeSource(&v.VolumeSource, p)...)
		if v.Name != "" {
			byName[v.Name] = v.VolumeSource
		}
	}
	return byName, allErrs
}

// countSources reports the JSON names of the non-nil pointer fields of a
// volume source union, in declaration order.
func countSources(src any) []string {
	v := reflect.ValueOf(src).Elem()
	t := v.Type()
	var set []string
	for i := 0; i < t.NumField(); i++ {
		f := v.Field(i)
		if f.Kind() == reflect.Pointer && !f.IsNil() {
			set = append(set, jsonName(t.Field(i)))
		}
	}
	return set
}

// oneSource enforces the one-of rule with upstream's messages: none is
// "must specify a volume type", each extra is "may not specify more than 1
// volume type" at that extra field.
func oneSource(set []string, fldPath *field.Path) field.ErrorList {
	if len(set) == 0 {
		return field.ErrorList{field.Required(fldPath, "must specify a volume type")}
	}
	var errs field.ErrorList
	for _, name := range set[1:] {
		errs = append(errs, field.Forbidden(fldPath.Child(name), "may not specify more than 1 volume type"))
	}
	return errs
}

func validateVolumeSource(src *corev1.VolumeSource, fldPath *field.Path) field.ErrorList {
	allErrs := oneSource(countSources(src), fldPath)
	if s := src.HostPath; s != nil {
		allErrs = append(allErrs, validateHostPath(s, fldPath.Child("hostPath"))...)
	}
	if s := src.EmptyDir; s != nil {
		if s.SizeLimit != nil && s.SizeLimit.Sign() < 0 {
			allErrs = append(allErrs, field.Forbidden(fldPath.Child("emptyDir", "sizeLimit"), "SizeLimit field must be a valid resource quantity"))
		}
		switch m := s.Medium; {
		case m == corev1.StorageMediumDefault, m == corev1.StorageMediumMemory, strings.HasPrefix(string(m), string(corev1.StorageMediumHugePages)):
		default:
			allErrs = append(allErrs, field.NotSupported(fldPath.Child("emptyDir", "medium"), m,
				[]corev1.StorageMedium{corev1.StorageMediumDefault, corev1.StorageMediumMemory, corev1.StorageMediumHugePages}))
		}
	}
	if s := src.Secret; s != nil {
		allErrs = append(allErrs, validateKeyToPathSource(s.SecretName, "secretName", s.DefaultMode, s.Items, fldPath.Child("secret"))...)
	}
	if s := src.ConfigMap; s != nil {
		allErrs = append(allErrs, validateKeyToPathSource(s.Name, "name", s.DefaultMode, s.Items, fldPath.Child("configMap"))...)
	}
	if s := src.PersistentVolumeClaim; s != nil && s.ClaimName == "" {
		allErrs = append(allErrs, field.Required(fldPath.Child("persistentVolumeClaim", "claimName"), ""))
	}
	if s := src.DownwardAPI; s != nil {
		p := fldPath.Child("downwardAPI")
		allErrs = append(allErrs, validateFileMode(s.DefaultMode, p.Child("defaultMode"))...)
		allErrs = append(allErrs, validateDownwardAPIFiles(s.Items, p.Child("items"))...)
	}
	if s := src.Projected; s != nil {
		allErrs = append(allErrs, validateProjected(s, fldPath.Child("projected"))...)
	}
	if s := src.NFS; s != nil {
		allErrs = append(allErrs, validateNFS(s, fldPath.Child("nfs"))...)
	}
	if s := src.CSI; s != nil && s.Driver == "" {
		allErrs = append(allErrs, field.Required(fldPath.Child("csi", "driver"), ""))
	}
	if s := src.Ephemeral; s != nil {
		p := fldPath.Child("ephemeral")
		if s.VolumeClaimTemplate == nil {
			allErrs = append(allErrs, field.Required(p.Child("volumeClaimTemplate"), ""))
		} else {
			allErrs = append(allErrs, validatePVCSpec(&s.VolumeClaimTemplate.Spec, p.Child("volumeClaimTemplate", "spec"))...)
		}
	}
	if s := src.Image; s != nil {
		p := fldPath.Child("image")
		if s.Reference == "" {
			allErrs = append(allErrs, field.Required(p.Child("reference"), ""))
		}
		if s.PullPolicy != "" && !slices.Contains(supportedPullPolicies, s.PullPolicy) {
			allErrs = append(allErrs, field.NotSupported(p.Child("pullPolicy"), s.PullPolicy, supportedPullPolicies))
		}
	}
	return allErrs
}

// validateKeyToPathSource checks a Secret or ConfigMap volume source: the
// referenced object's name (at nameField) is required, and the file modes
// and item paths must be valid.
func validateKeyToPathSource(name, nameField string, defaultMode *int32, items []corev1.KeyToPath, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if name == "" {
		errs = append(errs, field.Required(fldPath.Child(nameField), ""))
	}
	errs = append(errs, validateFileMode(defaultMode, fldPath.Child("defaultMode"))...)
	return append(errs, validateKeyToPaths(items, fldPath.Child("items"))...)
}

func validateNFS(s *corev1.NFSVolumeSource, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.Server == "" {
		errs = append(errs, field.Required(fldPath.Child("server"), ""))
	}
	if s.Path == "" {
		errs = append(errs, field.Required(fldPath.Child("path"), ""))
	} else if !path.IsAbs(s.Path) {
		errs = append(errs, field.Invalid(fldPath.Child("path"), s.Path, "must be an absolute path"))
	}
	return errs
}

func validateHostPath(s *corev1.HostPathVolumeSource, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.Path == "" {
		errs = append(errs, field.Required(fldPath.Child("path"), ""))
		return errs
	}
	errs = append(errs, validatePathNoBacksteps(s.Path, fldPath.Child("path"))...)
	if s.Type != nil && !slices.Contains(supportedHostPathTypes, *s.Type) {
		errs = append(errs, field.NotSupported(fldPath.Child("type"), *s.Type, supportedHostPathTypes))
	}
	return errs
}

func validateFileMode(mode *int32, fldPath *field.Path) field.ErrorList {
	if mode != nil && (*mode > maxFileMode || *mode < 0) {
		return field.ErrorList{field.Invalid(fldPath, *mode, fileModeErrorMsg)}
	}
	return nil
}

func validateKeyToPaths(items []corev1.KeyToPath, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, kp := range items {
		p := fldPath.Index(i)
		if kp.Key == "" {
			errs = append(errs, field.Required(p.Child("key"), ""))
		}
		if kp.Path == "" {
			errs = append(errs, field.Required(p.Child("path"), ""))
		} else {
			errs = append(errs, validateLocalNonReservedPath(kp.Path, p.Child("path"))...)
		}
		errs = append(errs, validateFileMode(kp.Mode, p.Child("mode"))...)
	}
	return errs
}

// validateLocalNonReservedPath: item paths stay below the mount and may not
// start with "..", which the kubelet's atomic writer reserves.
func validateLocalNonReservedPath(target string, fldPath *field.Path) field.ErrorList {
	errs := validateLocalDescendingPath(target, fldPath)
	if strings.HasPrefix(target, "..") && !strings.HasPrefix(target, "../") {
		errs = append(errs, field.Invalid(fldPath, target, "must not start with '..'"))
	}
	return errs
}

func validateDownwardAPIFiles(items []corev1.DownwardAPIVolumeFile, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, f := range items {
		p := fldPath.Index(i)
		if f.Path == "" {
			errs = append(errs, field.Required(p.Child("path"), ""))
		} else {
			errs = append(errs, validateLocalNonReservedPath(f.Path, p.Child("path"))...)
		}
		errs = append(errs, validateFileMode(f.Mode, p.Child("mode"))...)
		switch {
		case f.FieldRef != nil && f.ResourceFieldRef != nil:
			errs = append(errs, field.Invalid(p, "resource", "fieldRef and resourceFieldRef can not be specified simultaneously"))
		case f.FieldRef != nil:
			errs = append(errs, validateObjectFieldSelector(f.FieldRef, validVolumeFieldPaths, p.Child("fieldRef"))...)
		case f.ResourceFieldRef != nil:
			errs = append(errs, validateResourceFieldSelector(f.ResourceFieldRef, true, p.Child("resourceFieldRef"))...)
		default:
			errs = append(errs, field.Required(p, "one of fieldRef and resourceFieldRef is required"))
		}
	}
	return errs
}

func validateProjected(s *corev1.ProjectedVolumeSource, fldPath *field.Path) field.ErrorList {
	errs := validateFileMode(s.DefaultMode, fldPath.Child("defaultMode"))
	paths := sets.New[string]()
	addPath := func(pth string, p *field.Path) {
		if paths.Has(pth) {
			errs = append(errs, field.Invalid(p, pth, "conflicting duplicate paths"))
		}
		paths.Insert(pth)
	}
	// Projected Secret and ConfigMap sources carry no defaultMode of their
	// own; their item paths join the others.
	keyToPaths := func(name string, items []corev1.KeyToPath, sp *field.Path) {
		errs = append(errs, validateKeyToPathSource(name, "name", nil, items, sp)...)
		for j, it := range items {
			addPath(it.Path, sp.Child("items").Index(j).Child("path"))
		}
	}
	for i, src := range s.Sources {
		p := fldPath.Child("sources").Index(i)
		n := len(countSources(&src))
		if n == 0 {
			errs = append(errs, field.Required(p, "must specify exactly 1 source type"))
		} else if n > 1 {
			errs = append(errs, field.Forbidden(p, "may not specify more than 1 volume type per source"))
		}
		if src.Secret != nil {
			keyToPaths(src.Secret.Name, src.Secret.Items, p.Child("secret"))
		}
		if src.ConfigMap != nil {
			keyToPaths(src.ConfigMap.Name, src.ConfigMap.Items, p.Child("configMap"))
		}
		if src.DownwardAPI != nil {
			errs = append(errs, validateDownwardAPIFiles(src.DownwardAPI.Items, p.Child("downwardAPI", "items"))...)
			for j, it := range src.DownwardAPI.Items {
				addPath(it.Path, p.Child("downwardAPI", "items").Index(j).Child("path"))
			}
		}
		if t := src.ServiceAccountToken; t != nil {
			tp := p.Child("serviceAccountToken")
			if t.ExpirationSeconds != nil {
				errs = append(errs, tokenExpiration(*t.ExpirationSeconds, tp.Child("expirationSeconds"))...)
			}
			if t.Path == "" {
				errs = append(errs, field.Required(tp.Child("path"), ""))
			} else {
				errs = append(errs, validateLocalNonReservedPath(t.Path, tp.Child("path"))...)
				addPath(t.Path, tp.Child("path"))
			}
		}
		if b := src.ClusterTrustBundle; b != nil {
			bp := p.Child("clusterTrustBundle")
			errs = append(errs, validateClusterTrustBundleProjection(b, bp)...)
			if b.Path == "" {
				errs = append(errs, field.Required(bp.Child("path"), ""))
			} else {
				errs = append(errs, validateLocalNonReservedPath(b.Path, bp.Child("path"))...)
				addPath(b.Path, bp.Child("path"))
			}
		}
		if c := src.PodCertificate; c != nil {
			cp := p.Child("podCertificate")
			errs = append(errs, validatePodCertificateProjection(c, cp)...)
			for _, f := range []struct {
				path string
				name string
			}{{c.CredentialBundlePath, "credentialBundlePath"}, {c.KeyPath, "keyPath"}, {c.CertificateChainPath, "certificateChainPath"}} {
				if f.path != "" {
					errs = append(errs, validateLocalNonReservedPath(f.path, cp.Child(f.name))...)
					addPath(f.path, cp.Child(f.name))
				}
			}
		}
	}
	return errs
}

// podCertificateKeyTypes are the key types a podCertificate projection
// may ask the kubelet to generate, as upstream lists them.
var podCertificateKeyTypes = []string{"RSA3072", "RSA4096", "ECDSAP256", "ECDSAP384", "ECDSAP521", "ED25519"}

// validatePodCertificateProjection is upstream's check of a projected
// podCertificate source but for its paths' form: the signer name's form,
// user annotations, the user ID, a known keyType, maxExpirationSeconds
// when set within [3600, 91 days] (24 hours for kubernetes.io signers),
// and at least one of the three paths.
func validatePodCertificateProjection(c *corev1.PodCertificateProjection, p *field.Path) field.ErrorList {
	errs := validateSignerName(p.Child("signerName"), c.SignerName)
	if c.UserAnnotations != nil {
		errs = append(errs, validateUserAnnotations(c.UserAnnotations, p.Child("userAnnotations"))...)
	}
	if c.User != nil {
		errs = append(errs, invalidFor64(*c.User, validation.IsValidUserID(*c.User), p.Child("user"))...)
	}
	if !slices.Contains(podCertificateKeyTypes, c.KeyType) {
		errs = append(errs, field.NotSupported(p.Child("keyType"), c.KeyType, podCertificateKeyTypes))
	}
	if m := c.MaxExpirationSeconds; m != nil {
		if *m < MinMaxExpirationSeconds {
			errs = append(errs, field.Invalid(p.Child("maxExpirationSeconds"), *m, "if provided, maxExpirationSeconds must be >= 3600"))
		}
		most := int32(MaxMaxExpirationSeconds)
		if isKubernetesSignerName(c.SignerName) {
			most = KubernetesMaxMaxExpirationSeconds
		}
		if *m > most {
			errs = append(errs, field.Invalid(p.Child("maxExpirationSeconds"), *m, fmt.Sprintf("if provided, maxExpirationSeconds must be <= %d", most)))
		}
	}
	if c.CredentialBundlePath == "" && c.KeyPath == "" && c.CertificateChainPath == "" {
		errs = append(errs, field.Required(p, "specify at least one of credentialBundlePath, keyPath, and certificateChainPath"))
	}
	return errs
}

func invalidFor64(v int64, msgs []string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range msgs {
		errs = append(errs, field.Invalid(fldPath, v, msg))
	}
	return errs
}

// validatePVSource is the one-of check for PersistentVolume sources, with
// the few per-source rules that catch common mistakes.
func validatePVSource(src *corev1.PersistentVolumeSource, fldPath *field.Path) field.ErrorList {
	allErrs := oneSource(countSources(src), fldPath)
	if s := src.HostPath; s != nil {
		allErrs = append(allErrs, validateHostPath(s, fldPath.Child("hostPath"))...)
	}
	if s := src.NFS; s != nil {
		allErrs = append(allErrs, validateNFS(s, fldPath.Child("nfs"))...)
	}
	if s := src.Local; s != nil {
		p := fldPath.Child("local")
		if s.Path == "" {
			allErrs = append(allErrs, field.Required(p.Child("path"), ""))
		} else {
			allErrs = append(allErrs, validatePathNoBacksteps(s.Path, p.Child("path"))...)
		}
	}
	if s := src.CSI; s != nil {
		p := fldPath.Child("csi")
		if s.Driver == "" {
			allErrs = append(allErrs, field.Required(p.Child("driver"), ""))
		}
		if s.VolumeHandle == "" {
			allErrs = append(allErrs, field.Required(p.Child("volumeHandle"), ""))
		}
	}
	return allErrs
}
