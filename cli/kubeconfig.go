package cli

import (
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"time"

	urfave "github.com/urfave/cli/v2"

	"github.com/kelp-project/kelp/config"
	"github.com/kelp-project/kelp/server/pki"
)

// userCertTTL is how long `kelp kubeconfig` certificates last by default: a
// year, as the components' own.
const userCertTTL = 365 * 24 * time.Hour

// Kubeconfig is `kelp kubeconfig --user NAME [--group G]... [--ttl D]`: it
// prints a kubeconfig whose client certificate, signed by the cluster CA,
// names the user (CN) and groups (O), so an admin can hand out access that
// RBAC then limits. It runs on a server machine: it reads the CA from the
// data dir and talks to no API.
func Kubeconfig() *urfave.Command {
	var dataDir, server, user string
	var groups urfave.StringSlice
	var ttl time.Duration
	return &urfave.Command{
		Name:  "kubeconfig",
		Usage: "print a kubeconfig for a user, with a client certificate signed by the cluster CA",
		Flags: []urfave.Flag{
			dataDirFlag(&dataDir),
			serverURLFlag(&server, "https://"+net.JoinHostPort("127.0.0.1", strconv.Itoa(config.HTTPSPort)), "the API server URL the kubeconfig names"),
			&urfave.StringFlag{Name: "user", Usage: "user name (the certificate's CN)", EnvVars: env("USER"), Destination: &user},
			&urfave.StringSliceFlag{Name: "group", Usage: "group (the certificate's O; repeat for more)", EnvVars: env("GROUP"), Destination: &groups},
			&urfave.DurationFlag{Name: "ttl", Value: userCertTTL, Usage: "how long the certificate is valid", EnvVars: env("TTL"), Destination: &ttl},
		},
		Action: func(c *urfave.Context) error {
			return userKubeconfig(c.App.Writer, dataDir, server, user, groups.Value(), ttl)
		},
	}
}

func userKubeconfig(w io.Writer, dataDir, server, user string, groups []string, ttl time.Duration) error {
	if user == "" {
		return errors.New("--user is required")
	}
	if ttl <= 0 {
		return errors.New("--ttl must be positive")
	}
	ca, err := pki.LoadCA(filepath.Join(dataDir, "server", "tls"))
	if err != nil {
		return fmt.Errorf("cluster CA (run this on a server, with its --data-dir): %w", err)
	}
	certPEM, keyPEM, err := ca.ClientCertFor(user, groups, ttl)
	if err != nil {
		return err
	}
	data, err := pki.Kubeconfig(server, ca.CertPEM, certPEM, keyPEM)
	if err != nil {
		return err
	}
	_, err = w.Write(data)
	return err
}
