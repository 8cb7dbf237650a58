// Package cli declares kelp's commands (server, agent, killall, kubectl)
// and their flags, with defaults from package config. It is the one place
// that joins the layers: the server command starts the control plane, then
// the local agent on it.
package cli

import (
	"time"

	"github.com/sirupsen/logrus"
	urfave "github.com/urfave/cli/v2"
)

// GlobalFlags are kelp's own flags, before the command.
func GlobalFlags() []urfave.Flag { return []urfave.Flag{debugFlag(nil)} }

// SetupLogging is the app's Before: logrus with full timestamps, at debug
// level for --debug. The server and agent commands take --debug too.
func SetupLogging(c *urfave.Context) error {
	logrus.SetFormatter(&logrus.TextFormatter{FullTimestamp: true, TimestampFormat: time.RFC3339Nano})
	if c.Bool("debug") {
		logrus.SetLevel(logrus.DebugLevel)
	}
	return nil
}
