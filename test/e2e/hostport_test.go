package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/userdata"
	"github.com/vishvananda/netns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kelp-project/kelp/netplane/hostport"
	"github.com/kelp-project/kelp/netplane/nft"
)

// Host ports as the conformance spec "HostPort validates that there is no
// conflict between pods with same hostPort but different hostIP and
// protocol" uses them: one host port on 127.0.0.1 (TCP), on the node's
// address (TCP) and on the node's address (UDP), each reaching its own
// pod from the host; a host port on every address; and no rule left once
// the pods are gone.
func TestHostPorts(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	nodeIP := ""
	for _, a := range c.node().Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			nodeIP = a.Address
		}
	}
	if nodeIP == "" {
		t.Fatal("the node has no InternalIP")
	}
	const port = 54323
	demo := func(name, hostIP string, hostPort int) string {
		ip := ""
		if hostIP != "" {
			ip = ", hostIP: " + hostIP
		}
		return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  terminationGracePeriodSeconds: 1
  containers: [{name: app, image: kelp/demo:v1, imagePullPolicy: IfNotPresent,
    ports: [{containerPort: 8000, hostPort: %d%s}]}]
`, name, hostPort, ip)
	}
	c.apply(t, demo("on-loopback", "127.0.0.1", port)+"---\n"+demo("on-node", nodeIP, port)+"---\n"+demo("everywhere", "", port+1)+`---
apiVersion: v1
kind: Pod
metadata: {name: on-node-udp}
spec:
  terminationGracePeriodSeconds: 1
  containers: [{name: c, image: busybox:1.35, imagePullPolicy: IfNotPresent, command: ["sleep", "3600"],
    ports: [{containerPort: 8080, hostPort: `+strconv.Itoa(port)+`, hostIP: `+nodeIP+`, protocol: UDP}]}]
`)
	names := []string{"on-loopback", "on-node", "everywhere", "on-node-udp"}
	uids := map[string]string{}
	for _, name := range names {
		c.waitFor(90*time.Second, name+" Running", func() bool { return c.pod(name).Status.Phase == corev1.PodRunning })
		uids[name] = string(c.pod(name).UID)
	}
	// The three pods with one host port were all scheduled and admitted:
	// different hostIP or protocol do not conflict.
	fromNode := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil,
		DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(nodeIP)}}).DialContext}}
	for _, q := range []struct {
		what   string
		client *http.Client
		url    string
		pod    string
	}{
		{"127.0.0.1 from 127.0.0.1", httpClient, fmt.Sprintf("http://127.0.0.1:%d/", port), "on-loopback"},
		{"127.0.0.1 from the node address (the spec's curl --interface)", fromNode, fmt.Sprintf("http://127.0.0.1:%d/", port), "on-loopback"},
		{"the node address", httpClient, fmt.Sprintf("http://%s:%d/", nodeIP, port), "on-node"},
		{"every address, on 127.0.0.1", httpClient, fmt.Sprintf("http://127.0.0.1:%d/", port+1), "everywhere"},
		{"every address, on the node address", httpClient, fmt.Sprintf("http://%s:%d/", nodeIP, port+1), "everywhere"},
	} {
		c.waitFor(20*time.Second, q.what+" reaching "+q.pod, func() bool {
			body, err := getWith(q.client, q.url)
			return err == nil && strings.Contains(body, "Hello from "+q.pod+" ")
		})
	}
	// UDP: the pod has no UDP server, so a datagram that reaches it counts
	// in its netns's Udp NoPorts (and is refused with ICMP): proof it went
	// to that pod, not to the node or another one.
	udpPod := filepath.Join(c.runDir, "netns", uids["on-node-udp"])
	before := udpNoPorts(t, udpPod)
	// An unconnected socket: a connected one would take the pod's ICMP
	// answer as an error on its next send, which then sends nothing.
	conn, err := net.ListenPacket("udp4", ":0")
	if err != nil {
		t.Fatal(err)
	}
	to := &net.UDPAddr{IP: net.ParseIP(nodeIP), Port: port}
	for range 3 {
		if _, err := conn.WriteTo([]byte("hostname"), to); err != nil {
			t.Errorf("UDP to %s: %v", to, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	conn.Close()
	if after := udpNoPorts(t, udpPod); after < before+3 {
		t.Errorf("UDP to %s:%d: the pod's Udp NoPorts went from %d to %d, want +3", nodeIP, port, before, after)
	}
	if owners := hostPortOwners(t); len(owners) == 0 {
		t.Fatal("no host port rules in table ip kelp")
	}

	for _, name := range names {
		if err := c.cs.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Gone from the API: the kubelet has torn their sandboxes down.
	c.waitFor(60*time.Second, "the pods gone", func() bool {
		l, err := c.cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		return err == nil && len(l.Items) == 0
	})
	c.waitFor(10*time.Second, "their host port rules gone", func() bool {
		for _, uid := range hostPortOwners(t) {
			for _, mine := range uids {
				if uid == mine {
					return false
				}
			}
		}
		return true
	})
	if body, err := httpGet(fmt.Sprintf("http://127.0.0.1:%d/", port)); err == nil {
		t.Errorf("127.0.0.1:%d still answers after its pod went: %q", port, body)
	}
}

// hostPortOwners lists the pod UIDs the host port rules of the host's
// table ip kelp are tagged with (netplane/hostport's comments).
func hostPortOwners(t *testing.T) []string {
	t.Helper()
	conn, err := nftables.New()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, chain := range []string{hostport.ChainDNAT, hostport.ChainMasq} {
		rules, err := conn.GetRules(nft.Table(), &nftables.Chain{Name: chain, Table: nft.Table()})
		if err != nil {
			continue // no chain
		}
		for _, r := range rules {
			if c, ok := userdata.GetString(r.UserData, userdata.TypeComment); ok {
				out = append(out, strings.TrimPrefix(c, "pod "))
			}
		}
	}
	return out
}

// udpNoPorts reads Udp NoPorts of the network namespace pinned at path.
func udpNoPorts(t *testing.T, path string) int {
	t.Helper()
	var snmp []byte
	errc := make(chan error, 1)
	go func() {
		// The thread enters the pod's netns and is thrown away after
		// (never unlocked), so no other goroutine runs in it.
		goruntime.LockOSThread()
		ns, err := netns.GetFromPath(path)
		if err != nil {
			errc <- err
			return
		}
		defer ns.Close()
		if err := netns.Set(ns); err != nil {
			errc <- err
			return
		}
		snmp, err = os.ReadFile("/proc/thread-self/net/snmp")
		errc <- err
	}()
	if err := <-errc; err != nil {
		t.Fatalf("reading the snmp counters of %s: %v", path, err)
	}
	// Two "Udp:" lines: the field names, then the values.
	var header []string
	for _, line := range strings.Split(string(snmp), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != "Udp:" {
			continue
		}
		if header == nil {
			header = f
			continue
		}
		for i, name := range header {
			if name == "NoPorts" && i < len(f) {
				n, _ := strconv.Atoi(f[i])
				return n
			}
		}
	}
	t.Fatalf("no Udp NoPorts in %s's snmp:\n%s", path, snmp)
	return 0
}
