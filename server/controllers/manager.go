package controllers

import (
	"context"
	"os"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
)

// LeaderElection holds upstream's leader-election timings.
type LeaderElection struct {
	LeaseDuration time.Duration // 15s upstream
	RenewDeadline time.Duration // 10s
	RetryPeriod   time.Duration // 2s
}

// DefaultLeaderElection is kube-controller-manager's and kube-scheduler's.
var DefaultLeaderElection = LeaderElection{LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second}

// Toolkit is what a component's loops are built from: one clientset, one
// shared informer factory (so every loop shares the same watches), and an
// event recorder per loop name.
type Toolkit struct {
	Config   *rest.Config
	Client   kubernetes.Interface
	Informer informers.SharedInformerFactory
	Recorder func(source string) record.EventRecorder
}

// RunComponent runs start under leader election for the Lease
// kube-system/<name>, as kube-controller-manager and kube-scheduler do, so
// several servers can run with one active instance. start must begin its
// loops and return; the informers start after it. When leadership is lost
// the loops' context ends and the election starts again.
func RunComponent(ctx context.Context, name string, cfg *rest.Config, le LeaderElection, start func(ctx context.Context, t *Toolkit) error) {
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		logrus.WithError(err).Errorf("%s: client", name)
		return
	}
	host, _ := os.Hostname()
	id := host + "_" + name + "_" + time.Now().Format("150405.000000")
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: "kube-system", Name: name},
		Client:     client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: id},
	}
	for ctx.Err() == nil {
		leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
			Lock: lock, Name: name, ReleaseOnCancel: true,
			LeaseDuration: le.LeaseDuration, RenewDeadline: le.RenewDeadline, RetryPeriod: le.RetryPeriod,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(lctx context.Context) {
					logrus.Infof("%s: became leader (%s)", name, id)
					if err := runToolkit(lctx, name, cfg, client, start); err != nil {
						logrus.WithError(err).Errorf("%s: start", name)
					}
					<-lctx.Done()
				},
				OnStoppedLeading: func() { logrus.Infof("%s: stopped leading", name) },
			},
		})
	}
}

func runToolkit(ctx context.Context, name string, cfg *rest.Config, client kubernetes.Interface, start func(context.Context, *Toolkit) error) error {
	// Events get their own client, as upstream components do, so that a
	// burst of events never takes throttling budget from real work.
	events, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: events.CoreV1().Events("")})
	go func() {
		<-ctx.Done()
		broadcaster.Shutdown()
	}()
	t := &Toolkit{
		Config:   cfg,
		Client:   client,
		Informer: informers.NewSharedInformerFactory(client, 0),
		Recorder: func(source string) record.EventRecorder {
			return broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: source})
		},
	}
	if err := start(ctx, t); err != nil {
		return err
	}
	t.Informer.Start(ctx.Done())
	return nil
}
