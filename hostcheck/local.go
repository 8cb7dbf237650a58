package hostcheck

import (
	"fmt"
	"net"
	"os"
	"os/exec"

	"github.com/google/nftables"
	"golang.org/x/sys/unix"
)

// Local is this machine: the root filesystem, PATH, netlink and the
// network stack, each used read-only.
func Local() *Host {
	var uts unix.Utsname
	_ = unix.Uname(&uts)
	return &Host{
		FS:       os.DirFS("/"),
		Release:  unix.ByteSliceToString(uts.Release[:]),
		LookPath: exec.LookPath,
		Output: func(name string, args ...string) (string, error) {
			out, err := exec.Command(name, args...).Output()
			return string(out), err
		},
		ListTables: func() (int, error) {
			c, err := nftables.New() // a netlink socket per request, closed after it
			if err != nil {
				return 0, err
			}
			ts, err := c.ListTables()
			return len(ts), err
		},
		Listen: func(network string, port int) error {
			addr := fmt.Sprintf(":%d", port)
			if network == "udp" {
				c, err := net.ListenPacket("udp", addr)
				if err != nil {
					return err
				}
				return c.Close()
			}
			l, err := net.Listen(network, addr)
			if err != nil {
				return err
			}
			return l.Close()
		},
		FreeBytes: func(path string) (uint64, error) {
			var st unix.Statfs_t
			if err := unix.Statfs(path, &st); err != nil {
				return 0, err
			}
			return st.Bavail * uint64(st.Bsize), nil
		},
	}
}
