// Package nodenet is the slot for the node network: what gives a node's
// pods their network namespace and IP and connects them to the rest of the
// cluster. The kelp flag is k3s's --flannel-backend; Config.NodeNetwork in
// package agent carries it here. Each backend is one entry in the table
// below (none: netplane/bridge; vxlan and host-gw: netplane/overlay on the
// bridge), so a backend is an addition to it, not an edit of the agent,
// the kubelet or killall.
//
// It is a package of its own rather than the netplane root because it
// imports its implementations (netplane/bridge, netplane/overlay) to list them, and
// netplane's other parts (nft, proxy, dns) are siblings that have nothing
// to do with choosing a backend; the root stays a directory.
package nodenet

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kelp-project/kelp/config"
	"github.com/kelp-project/kelp/netplane/bridge"
	"github.com/kelp-project/kelp/netplane/hostport"
	"github.com/kelp-project/kelp/netplane/overlay"
)

// Network is a node's pod network as the kubelet uses it (a superset of
// kubelet.Network, so the agent can hand one over). Implementations are
// safe for concurrent use and idempotent: the kubelet retries and, after a
// restart, repeats calls for pods that already have their network.
type Network interface {
	podNetwork
	// MapHostPorts maps the pod's host ports to its IP (netplane/hostport),
	// once Setup has given it one; Teardown and Recover remove them.
	MapHostPorts(pod *corev1.Pod, podIP netip.Addr) error
}

// podNetwork is what a backend implements; New puts the host port
// mappings, which every backend shares, on top (portMapped).
type podNetwork interface {
	// Setup gives pod podUID a network namespace, pinned at netnsPath,
	// with the pod's IP, or returns the existing ones.
	Setup(podUID string) (netnsPath string, ip netip.Addr, err error)
	// Teardown removes the pod's network and releases its IP.
	Teardown(podUID string) error
	// Recover tears down every pod not in keep (at kubelet start).
	Recover(keep map[string]bool) error
	// InNetNS runs fn in the network namespace at netnsPath (port-forward
	// dials the pod's loopback from inside).
	InNetNS(netnsPath string, fn func() error) error
}

// portMapped is a backend's network with its pods' host ports, which go
// with the pod's network: before it on Teardown and Recover, so no rule
// ever sends traffic to an IP given to another pod.
type portMapped struct {
	podNetwork
	ports *hostport.Mapper
}

func (n portMapped) MapHostPorts(pod *corev1.Pod, podIP netip.Addr) error {
	return n.ports.Map(string(pod.UID), podIP, hostport.ForPod(pod))
}

func (n portMapped) Teardown(podUID string) error {
	if err := n.ports.Unmap(podUID); err != nil {
		return err
	}
	return n.podNetwork.Teardown(podUID)
}

func (n portMapped) Recover(keep map[string]bool) error {
	return errors.Join(n.ports.Recover(keep), n.podNetwork.Recover(keep))
}

// withHostPorts wraps a backend's New: the mappings live in the node's
// namespace (the caller's) and pods are behind the bridge's default
// interface, as bridgeConfig sets it up.
func withHostPorts(newNet func(Options) (podNetwork, error)) func(Options) (Network, error) {
	return func(o Options) (Network, error) {
		n, err := newNet(o)
		if err != nil {
			return nil, err
		}
		return portMapped{podNetwork: n, ports: hostport.New(hostport.Config{Bridge: bridge.DefaultBridgeName})}, nil
	}
}

// Options is what a backend is given. The fields after RunDir are the
// overlays' (New only): they annotate the own Node and watch the others.
type Options struct {
	// PodCIDR is the node's range from node IPAM (New only: Cleanup runs
	// without the API and finds what it needs in the backend's own state).
	PodCIDR string
	// ClusterCIDR is the whole pod network (New only).
	ClusterCIDR string
	// AgentDir is <data-dir>/agent; a backend keeps its state in a
	// directory of its own below it.
	AgentDir string
	// RunDir is kelp's runtime directory (/run/kelp); pod netns pins go in
	// RunDir/netns.
	RunDir string

	// Context bounds the overlays' Node watch (New only).
	Context context.Context
	// Client watches every Node (the proxy's identity: a node may read
	// only its own Node); NodeClient annotates the own Node (the node's
	// identity, which NodeRestriction lets write its own annotations). A nil
	// NodeClient uses Client.
	Client, NodeClient kubernetes.Interface
	// NodeName and NodeIP are the own Node's name and InternalIP.
	NodeName, NodeIP string
	// Iface is --flannel-iface: the interface carrying the overlay ("" =
	// the one holding NodeIP).
	Iface string
}

// Backend is one node-network implementation.
type Backend struct {
	Name string
	// New builds the node's pod network, adopting what an earlier agent
	// left (the data plane outlives the agent).
	New func(Options) (Network, error)
	// Cleanup removes everything the backend left on the node and nothing
	// else, and is a no-op when there is nothing. It must not need a
	// running Network: kelp killall calls it with the agent stopped.
	Cleanup func(Options) error
}

// Default is the backend used when none is named (config.NodeNetwork).
const Default = config.NodeNetwork

// backends are the known implementations, by k3s's --flannel-backend
// names. Every one uses the bridge for the node-local part; none is the
// bridge alone (pods reach only pods of the same node, and the outside).
var backends = []Backend{
	{Name: "none", New: withHostPorts(newBridge), Cleanup: cleanupBridge},
	{Name: overlay.VXLAN, New: withHostPorts(newOverlay(overlay.VXLAN)), Cleanup: cleanupOverlay},
	{Name: overlay.HostGW, New: withHostPorts(newOverlay(overlay.HostGW)), Cleanup: cleanupOverlay},
}

// Lookup returns the backend called name ("" is Default), or an error
// listing the known ones.
func Lookup(name string) (Backend, error) {
	if name == "" {
		name = Default
	}
	for _, b := range backends {
		if b.Name == name {
			return b, nil
		}
	}
	return Backend{}, fmt.Errorf("unknown node network backend %q (known: %s)", name, strings.Join(Names(), ", "))
}

// Names lists the known backends, sorted.
func Names() []string {
	var out []string
	for _, b := range backends {
		out = append(out, b.Name)
	}
	sort.Strings(out)
	return out
}

// Cleanup runs every backend's Cleanup: killall does not know which
// backend the agent ran with (its flags may differ), and each Cleanup
// removes only its own objects, so running them all is safe. It stops at
// nothing: every backend gets its turn, and the errors are joined.
func Cleanup(opts Options) error {
	var errs []error
	// The host port mappings first: they point at the bridge's pods.
	if err := hostport.Cleanup(""); err != nil {
		errs = append(errs, fmt.Errorf("host ports: %w", err))
	}
	for _, b := range backends {
		if err := b.Cleanup(opts); err != nil {
			errs = append(errs, fmt.Errorf("node network %s: %w", b.Name, err))
		}
	}
	return errors.Join(errs...)
}

// Ran reports whether the agent whose directories opts names has set up a
// node network (every backend starts from the bridge, whose IPAM state is
// the evidence): kelp killall with another agent's directories must not
// tear down the network a live cluster uses.
func Ran(opts Options) bool { return bridge.Ran(bridgeConfig(opts)) }

// The bridge backend: netplane/bridge, IPAM state in <agent>/ipam, pod
// netns pins in <run>/netns.
func bridgeConfig(o Options) bridge.Config {
	return bridge.Config{PodCIDR: o.PodCIDR, ClusterCIDR: o.ClusterCIDR,
		StateDir: filepath.Join(o.AgentDir, "ipam"), NetNSDir: filepath.Join(o.RunDir, "netns")}
}

func newBridge(o Options) (podNetwork, error) { return bridge.New(bridgeConfig(o)) }

func cleanupBridge(o Options) error { return bridge.Cleanup(bridgeConfig(o)) }

// newOverlay builds backend name (netplane/overlay) on the bridge.
func newOverlay(name string) func(Options) (podNetwork, error) {
	return func(o Options) (podNetwork, error) {
		ctx := o.Context
		if ctx == nil {
			ctx = context.Background()
		}
		return overlay.New(ctx, overlay.Config{Backend: name, Bridge: bridgeConfig(o), NodeName: o.NodeName,
			NodeIP: o.NodeIP, Iface: o.Iface, Client: o.Client, NodeClient: o.NodeClient})
	}
}

// cleanupOverlay removes the overlays' objects (kelp.1, kelp's routes),
// then the bridge's: each backend's Cleanup is complete on its own, and
// the bridge's is idempotent, so running it once per backend is harmless.
func cleanupOverlay(o Options) error {
	return errors.Join(overlay.Cleanup(""), cleanupBridge(o))
}

var (
	_ podNetwork = (*bridge.Bridge)(nil)
	_ podNetwork = (*overlay.Overlay)(nil)
	_ Network    = portMapped{}
)
