package validation

import (
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestConfigMap(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg"}, Data: map[string]string{"app.properties": "a=b"}}
	expectErrors(t, Validate(cm), nil)

	bad := cm.DeepCopy()
	bad.Data["bad/key"] = "x"
	bad.BinaryData = map[string][]byte{"app.properties": []byte("dup")}
	expectErrors(t, Validate(bad), []want{
		{field.ErrorTypeInvalid, "data[bad/key]", ""},
		{field.ErrorTypeInvalid, "data[app.properties]", "duplicate of key present in binaryData"},
	})

	big := cm.DeepCopy()
	big.Data["big"] = strings.Repeat("x", maxConfigSize)
	expectErrors(t, Validate(big), []want{{field.ErrorTypeTooLong, "[]", "1048576"}})

	old := stored(cm.DeepCopy())
	old.Immutable = ptr.To(true)
	changed := old.DeepCopy()
	changed.Data["app.properties"] = "a=c"
	expectErrors(t, ValidateUpdate(changed, old), []want{{field.ErrorTypeForbidden, "data", "field is immutable when `immutable` is set"}})
	unfrozen := old.DeepCopy()
	unfrozen.Immutable = ptr.To(false)
	expectErrors(t, ValidateUpdate(unfrozen, old), []want{{field.ErrorTypeForbidden, "immutable", ""}})
	relabeled := old.DeepCopy()
	relabeled.Labels = map[string]string{"a": "b"}
	expectErrors(t, ValidateUpdate(relabeled, old), nil)
}

func TestSecret(t *testing.T) {
	s := defaulted(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds"}, StringData: map[string]string{"password": "hunter2"}})
	if string(s.Data["password"]) != "hunter2" || s.StringData != nil {
		t.Fatalf("stringData not folded into data: %+v", s)
	}
	expectErrors(t, Validate(s), nil)

	tls := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "tls"}, Type: corev1.SecretTypeTLS, Data: map[string][]byte{"tls.crt": nil}}
	expectErrors(t, Validate(tls), []want{{field.ErrorTypeRequired, "data[tls.key]", ""}})

	docker := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "reg"}, Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte("{not json")}}
	expectErrors(t, Validate(docker), []want{{field.ErrorTypeInvalid, "data[.dockerconfigjson]", ""}})

	sat := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "tok"}, Type: corev1.SecretTypeServiceAccountToken}
	expectErrors(t, Validate(sat), []want{{field.ErrorTypeRequired, "metadata.annotations[kubernetes.io/service-account.name]", ""}})

	big := s.DeepCopy()
	big.Data["blob"] = make([]byte, maxConfigSize)
	expectErrors(t, Validate(big), []want{{field.ErrorTypeTooLong, "data", ""}})

	old := stored(s.DeepCopy())
	retyped := old.DeepCopy()
	retyped.Type = corev1.SecretTypeBasicAuth
	expectErrors(t, ValidateUpdate(retyped, old), []want{{field.ErrorTypeInvalid, "type", "field is immutable"}})

	old.Immutable = ptr.To(true)
	changed := old.DeepCopy()
	changed.Data["password"] = []byte("x")
	expectErrors(t, ValidateUpdate(changed, old), []want{{field.ErrorTypeForbidden, "data", "field is immutable when `immutable` is set"}})
}

func TestServiceAccount(t *testing.T) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "builder"}}
	expectErrors(t, Validate(sa), nil)
	sa.Name = "Builder"
	expectErrors(t, Validate(sa), []want{{field.ErrorTypeInvalid, "metadata.name", ""}})
}
