package server

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/sirupsen/logrus"

	"github.com/kelp-project/kelp/server/join"
)

// tokens are the server's two join secrets.
type tokens struct {
	server, agent string
	// serverToken is the server token in full, as written to the token
	// file.
	serverToken string
}

// loadTokens settles the server and agent secrets and writes them to
// <serverDir>/token and <serverDir>/node-token in k3s's shape.
//
// The server secret is --token if given, else the one in the token file.
// A token file from before the K10 format holds a bare secret (the
// kelp-admin bearer token): it becomes the server secret, so the admin
// bearer token keeps working, and the file is rewritten in the new shape.
// The agent secret is --agent-token if given, else the node-token file's,
// else a new one: unlike k3s, which gives agents the server token when no
// agent token is set, kelp always keeps them apart, since the server
// secret is also the admin bearer token.
func loadTokens(serverDir string, caPEM []byte, serverFlag, agentFlag string) (tokens, error) {
	hash := join.CAHash(caPEM)
	tokenFile, nodeTokenFile := filepath.Join(serverDir, "token"), filepath.Join(serverDir, "node-token")
	server, err := settleSecret(tokenFile, serverFlag, "--token")
	if err != nil {
		return tokens{}, err
	}
	agent, err := settleSecret(nodeTokenFile, agentFlag, "--agent-token")
	if err != nil {
		return tokens{}, err
	}
	if agent == server {
		return tokens{}, errors.New("--agent-token must differ from the server token: the agent token may only join agents")
	}
	t := tokens{server: server, agent: agent,
		serverToken: join.Token{CAHash: hash, User: join.ServerUser, Secret: server}.String()}
	if err := writeToken(tokenFile, t.serverToken); err != nil {
		return tokens{}, err
	}
	nodeToken := join.Token{CAHash: hash, User: join.NodeUser, Secret: agent}.String()
	return t, writeToken(nodeTokenFile, nodeToken)
}

// settleSecret is flag's secret if set (a full token's or a bare one), else
// the secret in file, else a new one.
func settleSecret(file, flag, flagName string) (string, error) {
	var old string
	if data, err := os.ReadFile(file); err == nil && strings.TrimSpace(string(data)) != "" {
		t, err := join.ParseToken(string(data))
		if err != nil {
			return "", fmt.Errorf("%s: %w", file, err)
		}
		old = t.Secret
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	if flag != "" {
		t, err := join.ParseToken(flag)
		if err != nil {
			return "", fmt.Errorf("%s: %w", flagName, err)
		}
		if old != "" && old != t.Secret {
			logrus.Warnf("%s differs from the secret in %s: nodes must now join with the new one", flagName, file)
		}
		return t.Secret, nil
	}
	if old != "" {
		return old, nil
	}
	return join.NewSecret()
}

func writeToken(path, token string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
		return err
	}
	// WriteFile keeps an existing file's mode.
	return os.Chmod(path, 0o600)
}
