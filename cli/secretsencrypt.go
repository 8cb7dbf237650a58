package cli

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"

	urfave "github.com/urfave/cli/v2"

	"github.com/kelp-project/kelp/config"
	"github.com/kelp-project/kelp/server/join"
	"github.com/kelp-project/kelp/server/secretsencrypt"
)

// secretsEncryptOptions are the flags every subcommand takes.
type secretsEncryptOptions struct {
	dataDir, server, token string
	force, skip            bool
	output                 string
}

// SecretsEncrypt is `kelp secrets-encrypt`, k3s's command: it asks the
// running server, over its API port, with the server token (basic auth
// "server", as the join endpoints take it), and the server changes its
// keys live.
func SecretsEncrypt() *urfave.Command {
	o := &secretsEncryptOptions{}
	// A flag carries parse state, so each subcommand gets its own.
	common := func(extra ...urfave.Flag) []urfave.Flag {
		return append([]urfave.Flag{
			dataDirFlag(&o.dataDir),
			serverURLFlag(&o.server, "https://127.0.0.1:"+strconv.Itoa(config.HTTPSPort), "the server to ask"),
			tokenFlag(&o.token, "the server token (default: the one in <data-dir>/server/token)"),
		}, extra...)
	}
	force := func() urfave.Flag {
		return &urfave.BoolFlag{Name: "force", Aliases: []string{"f"}, Usage: "do it even if the rotation is at another stage", Destination: &o.force}
	}
	stage := func(name, usage string, extra ...urfave.Flag) *urfave.Command {
		return &urfave.Command{Name: name, Usage: usage, Flags: common(extra...),
			Action: func(c *urfave.Context) error {
				return o.command(c.Context, c.App.Writer, secretsencrypt.Request{Stage: name, Force: o.force, Skip: o.skip})
			}}
	}
	enable := func(name string, on bool, usage string) *urfave.Command {
		return &urfave.Command{Name: name, Usage: usage, Flags: common(),
			Action: func(c *urfave.Context) error {
				return o.command(c.Context, c.App.Writer, secretsencrypt.Request{Enable: &on})
			}}
	}
	return &urfave.Command{
		Name:  "secrets-encrypt",
		Usage: "control secrets encryption at rest (kelp server --secrets-encryption) and rotate its keys",
		Subcommands: []*urfave.Command{
			{
				Name:  "status",
				Usage: "print whether Secrets are encrypted, the rotation stage and the keys",
				Flags: common(&urfave.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "text", Usage: "text or json", Destination: &o.output}),
				Action: func(c *urfave.Context) error {
					return o.status(c.Context, c.App.Writer)
				},
			},
			enable("enable", true, "encrypt new writes (the encrypting provider first)"),
			enable("disable", false, "write new values in plaintext (identity first)"),
			stage(secretsencrypt.CmdPrepare, "add a new key, which reads but does not yet write", force()),
			stage(secretsencrypt.CmdRotate, "make the prepared key the write key", force()),
			stage(secretsencrypt.CmdReencrypt, "rewrite every Secret with the write key, then remove the oldest key", force(),
				&urfave.BoolFlag{Name: "skip", Usage: "keep the oldest key", Destination: &o.skip}),
			stage(secretsencrypt.CmdRotateKeys, "add a new write key, rewrite every Secret with it, then remove the old keys", force()),
		},
	}
}

// client is an HTTPS client that trusts only the cluster CA of the data
// dir, and the secret to authenticate with.
func (o *secretsEncryptOptions) client() (*http.Client, string, error) {
	tok := o.token
	if tok == "" {
		file := filepath.Join(o.dataDir, "server", "token")
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, "", fmt.Errorf("no --token, and the server token is unreadable: %w", err)
		}
		tok = string(data)
	}
	t, err := join.ParseToken(tok)
	if err != nil {
		return nil, "", fmt.Errorf("--token: %w", err)
	}
	caFile := filepath.Join(o.dataDir, "server", "tls", "ca.crt")
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		return nil, "", fmt.Errorf("cluster CA: %w", err)
	}
	if t.CAHash != "" && t.CAHash != join.CAHash(caPEM) {
		return nil, "", fmt.Errorf("%s is not the CA the token names", caFile)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, "", fmt.Errorf("%s: no certificates", caFile)
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}, t.Secret, nil
}

// call sends one request and decodes a JSON answer into out; a server's
// refusal is its one-line message.
func (o *secretsEncryptOptions) call(ctx context.Context, method, path string, body, out any) error {
	hc, secret, err := o.client()
	if err != nil {
		return err
	}
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(o.server, "/")+path, rd)
	if err != nil {
		return err
	}
	req.SetBasicAuth(join.ServerUser, secret)
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("reaching the server: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		msg := strings.TrimSpace(string(data))
		if resp.StatusCode == http.StatusNotFound {
			msg = "the server does not serve " + path + " (an older kelp?)"
		}
		return errors.New(msg)
	}
	return json.Unmarshal(data, out)
}

func (o *secretsEncryptOptions) command(ctx context.Context, w io.Writer, req secretsencrypt.Request) error {
	var res secretsencrypt.Result
	if err := o.call(ctx, http.MethodPut, secretsencrypt.ConfigPath, req, &res); err != nil {
		return err
	}
	fmt.Fprintln(w, res.Message)
	return nil
}

func (o *secretsEncryptOptions) status(ctx context.Context, w io.Writer) error {
	var st secretsencrypt.Status
	if err := o.call(ctx, http.MethodGet, secretsencrypt.StatusPath, nil, &st); err != nil {
		return err
	}
	if o.output == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(st)
	}
	if o.output != "text" {
		return fmt.Errorf("--output %q: want text or json", o.output)
	}
	printEncryptionStatus(w, st)
	return nil
}

// printEncryptionStatus prints k3s's layout of the status.
func printEncryptionStatus(w io.Writer, st secretsencrypt.Status) {
	if st.ConfigHash == "" {
		fmt.Fprintln(w, "Encryption Status: Disabled, no configuration file found (the server runs without --secrets-encryption)")
		return
	}
	if st.Enabled {
		fmt.Fprintln(w, "Encryption Status: Enabled")
	} else {
		fmt.Fprintln(w, "Encryption Status: Disabled")
	}
	fmt.Fprintln(w, "Current Rotation Stage:", st.Stage)
	// kelp has one server: the hash it runs with against the file's.
	if st.ConfigHash == st.FileHash {
		fmt.Fprintln(w, "Server Encryption Hashes: All hashes match")
	} else {
		fmt.Fprintf(w, "Server Encryption Hashes: hash does not match: the server runs %.12s, the file on disk is %.12s (edited by hand? the next command loads it)\n", st.ConfigHash, st.FileHash)
	}
	if st.LastError != "" {
		fmt.Fprintln(w, "Last Error:", st.LastError)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "Active\tKey Type\tName")
	fmt.Fprintln(tw, "------\t--------\t----")
	for _, k := range st.Keys {
		active := ""
		if k.Active {
			active = " *"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", active, k.Type, k.Name)
	}
	tw.Flush()
}
