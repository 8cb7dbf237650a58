package validation

import (
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// maxConfigSize bounds a ConfigMap's or Secret's payload (1 MiB), so that
// every object fits comfortably in one etcd value.
const maxConfigSize = 1 * 1024 * 1024

const immutableWhenSetMsg = "field is immutable when `immutable` is set"

func ConfigMap(cm *corev1.ConfigMap) field.ErrorList {
	allErrs := validateObjectMeta(&cm.ObjectMeta, true, nameIsDNSSubdomain)
	total := 0
	for key, value := range cm.Data {
		p := field.NewPath("data").Key(key)
		for _, msg := range validation.IsConfigMapKey(key) {
			allErrs = append(allErrs, field.Invalid(p, key, msg))
		}
		// Both maps become files in the same directory when mounted.
		if _, dup := cm.BinaryData[key]; dup {
			allErrs = append(allErrs, field.Invalid(p, key, "duplicate of key present in binaryData"))
		}
		total += len(value)
	}
	for key, value := range cm.BinaryData {
		for _, msg := range validation.IsConfigMapKey(key) {
			allErrs = append(allErrs, field.Invalid(field.NewPath("binaryData").Key(key), key, msg))
		}
		total += len(value)
	}
	if total > maxConfigSize {
		// An empty path: the error concerns the whole object.
		allErrs = append(allErrs, field.TooLong(field.NewPath(""), "", maxConfigSize))
	}
	return allErrs
}

// validateConfigMapUpdate: `immutable: true` is a one-way switch that also
// freezes the payload (so kubelets can stop watching it).
func ConfigMapUpdate(newCM, oldCM *corev1.ConfigMap) field.ErrorList {
	allErrs := validateObjectMetaUpdate(&newCM.ObjectMeta, &oldCM.ObjectMeta)
	if oldCM.Immutable != nil && *oldCM.Immutable {
		if newCM.Immutable == nil || !*newCM.Immutable {
			allErrs = append(allErrs, field.Forbidden(field.NewPath("immutable"), immutableWhenSetMsg))
		}
		if !apiequality.Semantic.DeepEqual(newCM.Data, oldCM.Data) {
			allErrs = append(allErrs, field.Forbidden(field.NewPath("data"), immutableWhenSetMsg))
		}
		if !apiequality.Semantic.DeepEqual(newCM.BinaryData, oldCM.BinaryData) {
			allErrs = append(allErrs, field.Forbidden(field.NewPath("binaryData"), immutableWhenSetMsg))
		}
	}
	return append(allErrs, ConfigMap(newCM)...)
}

// validateSecret expects stringData to have been folded into data already
// (defaults.Apply does that, as upstream's conversion does).
func Secret(s *corev1.Secret) field.ErrorList {
	allErrs := validateObjectMeta(&s.ObjectMeta, true, nameIsDNSSubdomain)
	dataPath := field.NewPath("data")
	total := 0
	for key, value := range s.Data {
		for _, msg := range validation.IsConfigMapKey(key) {
			allErrs = append(allErrs, field.Invalid(dataPath.Key(key), key, msg))
		}
		total += len(value)
	}
	for key, value := range s.StringData {
		for _, msg := range validation.IsConfigMapKey(key) {
			allErrs = append(allErrs, field.Invalid(field.NewPath("stringData").Key(key), key, msg))
		}
		if _, dup := s.Data[key]; !dup {
			total += len(value)
		}
	}
	if total > maxConfigSize {
		allErrs = append(allErrs, field.TooLong(dataPath, "", maxConfigSize))
	}

	// Typed secrets promise consumers certain keys.
	switch s.Type {
	case corev1.SecretTypeServiceAccountToken:
		if s.Annotations[corev1.ServiceAccountNameKey] == "" {
			allErrs = append(allErrs, field.Required(metadataPath.Child("annotations").Key(corev1.ServiceAccountNameKey), ""))
		}
	case corev1.SecretTypeDockercfg, corev1.SecretTypeDockerConfigJson:
		key := corev1.DockerConfigKey
		if s.Type == corev1.SecretTypeDockerConfigJson {
			key = corev1.DockerConfigJsonKey
		}
		raw, ok := s.Data[key]
		if !ok {
			allErrs = append(allErrs, field.Required(dataPath.Key(key), ""))
			break
		}
		if err := json.Unmarshal(raw, &map[string]any{}); err != nil {
			allErrs = append(allErrs, field.Invalid(dataPath.Key(key), "<secret contents redacted>", err.Error()))
		}
	case corev1.SecretTypeBasicAuth:
		_, u := s.Data[corev1.BasicAuthUsernameKey]
		_, p := s.Data[corev1.BasicAuthPasswordKey]
		if !u && !p {
			allErrs = append(allErrs, field.Required(dataPath.Key(corev1.BasicAuthUsernameKey), ""))
			allErrs = append(allErrs, field.Required(dataPath.Key(corev1.BasicAuthPasswordKey), ""))
		}
	case corev1.SecretTypeSSHAuth:
		if len(s.Data[corev1.SSHAuthPrivateKey]) == 0 {
			allErrs = append(allErrs, field.Required(dataPath.Key(corev1.SSHAuthPrivateKey), ""))
		}
	case corev1.SecretTypeTLS:
		if _, ok := s.Data[corev1.TLSCertKey]; !ok {
			allErrs = append(allErrs, field.Required(dataPath.Key(corev1.TLSCertKey), ""))
		}
		if _, ok := s.Data[corev1.TLSPrivateKeyKey]; !ok {
			allErrs = append(allErrs, field.Required(dataPath.Key(corev1.TLSPrivateKeyKey), ""))
		}
	}
	return allErrs
}

// validateSecretUpdate: the type is fixed (consumers depend on its keys),
// and `immutable: true` freezes the data for good.
func SecretUpdate(newS, oldS *corev1.Secret) field.ErrorList {
	allErrs := validateObjectMetaUpdate(&newS.ObjectMeta, &oldS.ObjectMeta)
	allErrs = append(allErrs, validateImmutable(newS.Type, oldS.Type, field.NewPath("type"))...)
	if oldS.Immutable != nil && *oldS.Immutable {
		if newS.Immutable == nil || !*newS.Immutable {
			allErrs = append(allErrs, field.Forbidden(field.NewPath("immutable"), immutableWhenSetMsg))
		}
		if !apiequality.Semantic.DeepEqual(newS.Data, oldS.Data) || len(newS.StringData) > 0 {
			allErrs = append(allErrs, field.Forbidden(field.NewPath("data"), immutableWhenSetMsg))
		}
	}
	return append(allErrs, Secret(newS)...)
}

func ServiceAccount(sa *corev1.ServiceAccount) field.ErrorList {
	allErrs := validateObjectMeta(&sa.ObjectMeta, true, nameIsDNSSubdomain)
	for i, ref := range sa.ImagePullSecrets {
		if ref.Name == "" {
			allErrs = append(allErrs, field.Required(field.NewPath("imagePullSecrets").Index(i).Child("name"), ""))
		}
	}
	return allErrs
}
