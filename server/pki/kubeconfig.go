package pki

import (
	"os"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// WriteKubeconfig writes a kubeconfig with one cluster, one user (client
// certificate) and one context, all named "default" as k3s does.
func WriteKubeconfig(path string, mode os.FileMode, server string, caPEM, certPEM, keyPEM []byte) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["default"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos["default"] = &clientcmdapi.AuthInfo{ClientCertificateData: certPEM, ClientKeyData: keyPEM}
	cfg.Contexts["default"] = &clientcmdapi.Context{Cluster: "default", AuthInfo: "default"}
	cfg.CurrentContext = "default"
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return err
	}
	return writeFile(path, data, mode)
}
