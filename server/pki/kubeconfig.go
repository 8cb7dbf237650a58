package pki

import (
	"os"
	"strings"

	"k8s.io/client-go/rest"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// WriteKubeconfig writes Kubeconfig to path.
func WriteKubeconfig(path string, mode os.FileMode, server string, caPEM, certPEM, keyPEM []byte) error {
	data, err := Kubeconfig(server, caPEM, certPEM, keyPEM)
	if err != nil {
		return err
	}
	return WriteFile(path, data, mode)
}

// Kubeconfig is a kubeconfig with one cluster, one user (client
// certificate) and one context, all named "default" as k3s does.
func Kubeconfig(server string, caPEM, certPEM, keyPEM []byte) ([]byte, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["default"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos["default"] = &clientcmdapi.AuthInfo{ClientCertificateData: certPEM, ClientKeyData: keyPEM}
	cfg.Contexts["default"] = &clientcmdapi.Context{Cluster: "default", AuthInfo: "default"}
	cfg.CurrentContext = "default"
	return clientcmd.Write(*cfg)
}

// RESTConfig is a client configuration for an in-process component: it
// reaches the API server at host with its own client certificate, so the
// API server authenticates it like any other client.
func (ca *CA) RESTConfig(host, user string, groups []string) (*rest.Config, error) {
	certPEM, keyPEM, err := ca.ClientCert(user, groups)
	if err != nil {
		return nil, err
	}
	return &rest.Config{
		Host:            host,
		TLSClientConfig: rest.TLSClientConfig{CAData: ca.CertPEM, CertData: certPEM, KeyData: keyPEM},
		UserAgent:       strings.TrimPrefix(user, "system:"),
		// In-process components are trusted: the limit only stops a runaway
		// loop from flooding the server, and is far above what scheduling
		// 1,000 pods at once needs (one binding each).
		QPS:   1000,
		Burst: 2000,
	}, nil
}
