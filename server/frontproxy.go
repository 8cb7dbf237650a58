package server

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kelp-project/kelp/config"
	"github.com/kelp-project/kelp/server/pki"
)

// frontProxy is the aggregator's identity towards extension API servers
// (kube-apiserver's --requestheader-client-ca-file and
// --proxy-client-cert-file/--proxy-client-key-file): a CA of its own and a
// client certificate it signed for system:auth-proxy, both under
// <data-dir>/server/tls (request-header-ca.*, client-auth-proxy.*, k3s's
// names), made at first start and kept.
type frontProxy struct {
	caPEM, certPEM, keyPEM []byte
}

func loadFrontProxy(tlsDir string) (*frontProxy, error) {
	ca, err := pki.LoadOrCreateRequestHeaderCA(tlsDir)
	if err != nil {
		return nil, fmt.Errorf("request-header CA: %w", err)
	}
	certPEM, keyPEM, err := ca.ClientCertFile(tlsDir, "client-auth-proxy", config.AuthProxyUser, nil)
	if err != nil {
		return nil, fmt.Errorf("front-proxy client certificate: %w", err)
	}
	return &frontProxy{caPEM: ca.CertPEM, certPEM: certPEM, keyPEM: keyPEM}, nil
}

// AuthenticationConfigMap is kube-system/extension-apiserver-authentication,
// which extension API servers read (with the extension-apiserver-
// authentication-reader Role) to learn whom to trust.
const AuthenticationConfigMap = "extension-apiserver-authentication"

// authenticationData is the ConfigMap's data as kube-apiserver's
// cluster-authentication-trust controller writes it: the client CA, and
// the request-header CA with the one name it signed and the headers the
// aggregator sets (X-Remote-Uid too: the aggregator sends a user's UID,
// as upstream's with RemoteRequestHeaderUID).
func authenticationData(clientCA []byte, fp *frontProxy) (map[string]string, error) {
	data := map[string]string{
		"client-ca-file":               string(clientCA),
		"requestheader-client-ca-file": string(fp.caPEM),
	}
	for key, list := range map[string][]string{
		"requestheader-allowed-names":        {config.AuthProxyUser},
		"requestheader-username-headers":     {"X-Remote-User"},
		"requestheader-uid-headers":          {"X-Remote-Uid"},
		"requestheader-group-headers":        {"X-Remote-Group"},
		"requestheader-extra-headers-prefix": {"X-Remote-Extra-"},
	} {
		b, err := json.Marshal(list)
		if err != nil {
			return nil, err
		}
		data[key] = string(b)
	}
	return data, nil
}

// publishAuthentication creates or updates the ConfigMap, at every start
// (a CA renewed, a name changed, a user's edit undone).
func publishAuthentication(ctx context.Context, client kubernetes.Interface, clientCA []byte, fp *frontProxy) error {
	data, err := authenticationData(clientCA, fp)
	if err != nil {
		return err
	}
	cms := client.CoreV1().ConfigMaps(metav1.NamespaceSystem)
	for {
		cur, err := cms.Get(ctx, AuthenticationConfigMap, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: AuthenticationConfigMap, Namespace: metav1.NamespaceSystem}, Data: data}, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				continue
			}
			return err
		}
		if err != nil {
			return err
		}
		if equality.Semantic.DeepEqual(cur.Data, data) {
			return nil
		}
		cur.Data = data
		_, err = cms.Update(ctx, cur, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			continue
		}
		return err
	}
}
