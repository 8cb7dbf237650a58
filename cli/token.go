package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	urfave "github.com/urfave/cli/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kelp-project/kelp/config"
	"github.com/kelp-project/kelp/server/join"
)

// Token is `kelp token create|list|delete`: bootstrap tokens, Secrets in
// kube-system that join agents until they expire. It talks to the API
// with the admin kubeconfig, as kubectl would.
func Token() *urfave.Command {
	var kubeconfig string
	// Each subcommand takes --kubeconfig, as kubectl's do; a flag carries
	// parse state, so each gets its own.
	kubeconfigFlag := func() urfave.Flag {
		return &urfave.StringFlag{Name: "kubeconfig", Value: config.Kubeconfig, Usage: "admin kubeconfig to reach the API server", EnvVars: env("KUBECONFIG"), Destination: &kubeconfig}
	}
	var ttl time.Duration
	var description string
	client := func() (kubernetes.Interface, error) {
		rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("--kubeconfig: %w", err)
		}
		return kubernetes.NewForConfig(rc)
	}
	return &urfave.Command{
		Name:  "token",
		Usage: "manage bootstrap tokens, which join agents until they expire",
		Subcommands: []*urfave.Command{
			{
				Name:  "create",
				Usage: "create a bootstrap token and print it, bare and in the K10 form",
				Flags: []urfave.Flag{
					kubeconfigFlag(),
					&urfave.DurationFlag{Name: "ttl", Value: config.BootstrapTokenTTL, Usage: "how long the token joins agents (0: forever)", EnvVars: env("TTL"), Destination: &ttl},
					&urfave.StringFlag{Name: "description", Usage: "what the token is for, shown by kelp token list", EnvVars: env("DESCRIPTION"), Destination: &description},
				},
				Action: func(c *urfave.Context) error {
					cs, err := client()
					if err != nil {
						return err
					}
					return tokenCreate(c.Context, c.App.Writer, cs, ttl, description)
				},
			},
			{
				Name:  "list",
				Usage: "list the bootstrap tokens",
				Flags: []urfave.Flag{kubeconfigFlag()},
				Action: func(c *urfave.Context) error {
					cs, err := client()
					if err != nil {
						return err
					}
					return tokenList(c.Context, c.App.Writer, cs, time.Now())
				},
			},
			{
				Name:      "delete",
				Usage:     "delete bootstrap tokens",
				ArgsUsage: "ID|ID.SECRET...",
				Flags:     []urfave.Flag{kubeconfigFlag()},
				Action: func(c *urfave.Context) error {
					if c.NArg() == 0 {
						return fmt.Errorf("kelp token delete: give the ID of a token (see kelp token list)")
					}
					cs, err := client()
					if err != nil {
						return err
					}
					return tokenDelete(c.Context, c.App.Writer, cs, c.Args().Slice())
				},
			},
		},
	}
}

func tokenCreate(ctx context.Context, out io.Writer, cs kubernetes.Interface, ttl time.Duration, description string) error {
	if ttl < 0 {
		return fmt.Errorf("--ttl %s: negative", ttl)
	}
	id, secret, err := join.NewBootstrapToken()
	if err != nil {
		return err
	}
	// The CA bundle exactly as the server serves it to joining agents,
	// so that the hash is the one they compute.
	caPEM, err := cs.CoreV1().RESTClient().Get().AbsPath(join.CACertsPath).DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("fetching %s: %w", join.CACertsPath, err)
	}
	s := join.NewBootstrapSecret(id, secret, description, ttl, time.Now())
	if _, err := cs.CoreV1().Secrets(metav1.NamespaceSystem).Create(ctx, s, metav1.CreateOptions{}); err != nil {
		return err
	}
	bare := id + "." + secret
	_, err = fmt.Fprintf(out, "%s\n%s\n", bare, join.Token{CAHash: join.CAHash(caPEM), Secret: bare})
	return err
}

func tokenList(ctx context.Context, out io.Writer, cs kubernetes.Interface, now time.Time) error {
	list, err := cs.CoreV1().Secrets(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("type", join.BootstrapTokenSecretType).String()})
	if err != nil {
		return err
	}
	slices.SortFunc(list.Items, func(a, b corev1.Secret) int { return strings.Compare(a.Name, b.Name) })
	w := tabwriter.NewWriter(out, 0, 8, 3, ' ', 0)
	fmt.Fprintln(w, "ID\tTTL\tEXPIRES\tDESCRIPTION")
	for i := range list.Items {
		b, err := join.ParseBootstrapSecret(&list.Items[i])
		if err != nil {
			fmt.Fprintf(w, "%s\t<invalid>\t\t%v\n", strings.TrimPrefix(list.Items[i].Name, join.BootstrapTokenSecretPrefix), err)
			continue
		}
		ttl, expires := "<forever>", "<never>"
		if b.Expires != nil {
			expires = b.Expires.UTC().Format(time.RFC3339)
			ttl = "<expired>"
			if !b.Expired(now) {
				ttl = b.Expires.Sub(now).Round(time.Second).String()
			}
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", b.ID, ttl, expires, b.Description)
	}
	return w.Flush()
}

func tokenDelete(ctx context.Context, out io.Writer, cs kubernetes.Interface, args []string) error {
	for _, a := range args {
		id, _, _ := strings.Cut(a, ".")
		if i := strings.LastIndex(id, "::"); i >= 0 { // a K10 token
			id, _, _ = strings.Cut(id[i+2:], ".")
		}
		err := cs.CoreV1().Secrets(metav1.NamespaceSystem).Delete(ctx, join.BootstrapTokenSecretPrefix+id, metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("bootstrap token %s not found", id)
		} else if err != nil {
			return err
		}
		fmt.Fprintf(out, "bootstrap token %s deleted\n", id)
	}
	return nil
}
