package bridge

import (
	"os/exec"
)

// execIn runs a command with only its network namespace switched to the
// one at nsPath (like `nsenter --net=`): the child inherits the netns of
// the locked thread that starts it.
func execIn(nsPath string, name string, args ...string) ([]byte, error) {
	var out []byte
	var runErr error
	err := InNetNSPath(nsPath, func() error {
		out, runErr = exec.Command(name, args...).CombinedOutput()
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, runErr
}
