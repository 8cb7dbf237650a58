package kubelet

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// writePodFiles writes the files every container of the pod mounts, as
// the CRI runtime does: /etc/hosts, /etc/hostname and /etc/resolv.conf.
func (k *Kubelet) writePodFiles(pod *corev1.Pod) error {
	dir := k.podDir(pod.UID)
	if err := os.MkdirAll(filepath.Join(dir, "containers"), 0o750); err != nil {
		return err
	}
	files := map[string]string{
		"hostname":    k.utsHostname(pod) + "\n",
		"resolv.conf": k.resolvConf(pod),
	}
	if pod.Spec.HostNetwork {
		hosts, err := os.ReadFile("/etc/hosts")
		if err != nil {
			return err
		}
		files["hosts"] = string(hosts)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// writeHosts writes the pod's /etc/hosts once its IP is known, as the
// kubelet does: localhost lines, the pod's own name, hostAliases.
func (k *Kubelet) writeHosts(pod *corev1.Pod, ip string) error {
	if pod.Spec.HostNetwork {
		return nil
	}
	hostname := podHostname(pod)
	var b strings.Builder
	b.WriteString("# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n" +
		"fe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n")
	if pod.Spec.Subdomain != "" {
		fmt.Fprintf(&b, "%s\t%s.%s.%s.svc.%s\t%s\n", ip, hostname, pod.Spec.Subdomain, pod.Namespace, k.cfg.ClusterDomain, hostname)
	} else {
		fmt.Fprintf(&b, "%s\t%s\n", ip, hostname)
	}
	if len(pod.Spec.HostAliases) > 0 {
		b.WriteString("\n# Entries added by HostAliases.\n")
		for _, a := range pod.Spec.HostAliases {
			fmt.Fprintf(&b, "%s\t%s\n", a.IP, strings.Join(a.Hostnames, "\t"))
		}
	}
	return os.WriteFile(filepath.Join(k.podDir(pod.UID), "hosts"), []byte(b.String()), 0o644)
}

// resolvConf follows dnsPolicy: ClusterFirst (the default) points at the
// cluster DNS with the search path; Default uses the node's; None only
// dnsConfig. dnsConfig is merged in every case.
func (k *Kubelet) resolvConf(pod *corev1.Pod) string {
	policy := pod.Spec.DNSPolicy
	if policy == "" {
		policy = corev1.DNSClusterFirst
	}
	if policy == corev1.DNSClusterFirstWithHostNet && !pod.Spec.HostNetwork {
		policy = corev1.DNSClusterFirst
	}
	if policy == corev1.DNSClusterFirst && pod.Spec.HostNetwork {
		policy = corev1.DNSDefault
	}
	if policy == corev1.DNSClusterFirstWithHostNet {
		policy = corev1.DNSClusterFirst
	}
	var servers, searches, options []string
	switch policy {
	case corev1.DNSClusterFirst:
		if k.cfg.ClusterDNS != "" {
			servers = []string{k.cfg.ClusterDNS}
			d := k.cfg.ClusterDomain
			searches = []string{pod.Namespace + ".svc." + d, "svc." + d, d}
			options = []string{"ndots:5"}
		} else {
			servers, searches, options = hostResolv()
		}
	case corev1.DNSDefault:
		servers, searches, options = hostResolv()
	}
	if c := pod.Spec.DNSConfig; c != nil {
		servers = append(servers, c.Nameservers...)
		searches = append(searches, c.Searches...)
		for _, o := range c.Options {
			if o.Value != nil {
				options = append(options, o.Name+":"+*o.Value)
			} else {
				options = append(options, o.Name)
			}
		}
	}
	var b strings.Builder
	if len(searches) > 0 {
		b.WriteString("search " + strings.Join(searches, " ") + "\n")
	}
	for _, s := range servers {
		b.WriteString("nameserver " + s + "\n")
	}
	if len(options) > 0 {
		b.WriteString("options " + strings.Join(options, " ") + "\n")
	}
	return b.String()
}

func hostResolv() (servers, searches, options []string) {
	data, err := os.ReadFile("/etc/resolv.conf")
	if err != nil {
		return nil, nil, nil
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "nameserver":
			servers = append(servers, f[1])
		case "search":
			searches = append(searches, f[1:]...)
		case "options":
			options = append(options, f[1:]...)
		}
	}
	return servers, searches, options
}

func (k *Kubelet) removePodFiles(uid types.UID) {
	dir := k.podDir(uid)
	unmountVolumes(dir)
	_ = os.RemoveAll(dir)
}

// podHostname is the pod's own host name, as upstream's kubelet makes it:
// spec.hostname or the pod's name, cut to 63 characters (a label; a longer
// name fails sethostname in the runtime) without a trailing '-' or '.'.
func podHostname(pod *corev1.Pod) string {
	hostname := pod.Name
	if pod.Spec.Hostname != "" {
		hostname = pod.Spec.Hostname
	}
	const maxLabel = 63
	if len(hostname) > maxLabel {
		hostname = strings.TrimRight(hostname[:maxLabel], "-.")
	}
	return hostname
}

// utsHostname is what the pod's containers see as their host name: the
// node's with hostNetwork, else podHostname, or its FQDN under
// setHostnameAsFQDN when the pod has a subdomain (upstream's kubelet).
func (k *Kubelet) utsHostname(pod *corev1.Pod) string {
	if pod.Spec.HostNetwork {
		name, _ := os.Hostname()
		return name
	}
	hostname := podHostname(pod)
	if pod.Spec.SetHostnameAsFQDN != nil && *pod.Spec.SetHostnameAsFQDN && pod.Spec.Subdomain != "" {
		hostname = fmt.Sprintf("%s.%s.%s.svc.%s", hostname, pod.Spec.Subdomain, pod.Namespace, k.cfg.ClusterDomain)
	}
	return hostname
}
