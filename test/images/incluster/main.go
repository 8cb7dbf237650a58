// Command incluster is the test image's in-cluster API client: with
// client-go's rest.InClusterConfig (the pod's service-account token, the
// kube-root-ca.crt bundle, KUBERNETES_SERVICE_HOST/PORT) it lists the pods
// of its own namespace, again every -interval, and prints one line per
// attempt:
//
//	list pods in <ns>: status=200 pods=<n> token=<sha256 prefix>
//	list pods in <ns>: status=403 error=<message> token=<sha256 prefix>
//
// status is the HTTP code (0 when there was none), token identifies the
// token file's content at that moment, so a test sees it being refreshed.
// -namespace lists another namespace instead.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

const saDir = "/var/run/secrets/kubernetes.io/serviceaccount"

func main() {
	interval := flag.Duration("interval", 2*time.Second, "time between attempts (0: one attempt)")
	namespace := flag.String("namespace", "", "namespace to list (default: the pod's own)")
	flag.Parse()
	ns := *namespace
	if ns == "" {
		data, err := os.ReadFile(saDir + "/namespace")
		if err != nil {
			fmt.Println("reading the pod's namespace:", err)
			os.Exit(1)
		}
		ns = strings.TrimSpace(string(data))
	}
	for {
		fmt.Println(attempt(ns))
		if *interval <= 0 {
			return
		}
		time.Sleep(*interval)
	}
}

func attempt(ns string) string {
	prefix := "list pods in " + ns + ": "
	tok := "none"
	if data, err := os.ReadFile(saDir + "/token"); err == nil {
		sum := sha256.Sum256(data)
		tok = hex.EncodeToString(sum[:6])
	}
	// The config is read again every time, so a refreshed token is used.
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return prefix + fmt.Sprintf("status=0 error=%q token=%s", err.Error(), tok)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return prefix + fmt.Sprintf("status=0 error=%q token=%s", err.Error(), tok)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		code := 0
		var st apierrors.APIStatus
		if errors.As(err, &st) {
			code = int(st.Status().Code)
		}
		return prefix + fmt.Sprintf("status=%d error=%q token=%s", code, err.Error(), tok)
	}
	return prefix + fmt.Sprintf("status=200 pods=%d token=%s", len(pods.Items), tok)
}
