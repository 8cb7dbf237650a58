package config

import (
	"net"
	"os"
	"strings"
)

// DefaultAddress picks the address advertised to clients and used as a
// node's InternalIP: the bind address if specific and routable, else the
// host's first non-loopback IPv4 address (endpoints may not point at
// loopback).
func DefaultAddress(bind string) string {
	if ip := net.ParseIP(bind); ip != nil && !ip.IsUnspecified() && !ip.IsLoopback() {
		return bind
	}
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			return n.IP.String()
		}
	}
	return "127.0.0.1"
}

// NodeName is name, or the lower-cased hostname when name is empty (node
// names are DNS subdomains; hostnames may carry capitals).
func NodeName(name string) (string, error) {
	if name != "" {
		return name, nil
	}
	h, err := os.Hostname()
	if err != nil {
		return "", err
	}
	return strings.ToLower(h), nil
}
