package server

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/apimachinery/pkg/util/httpstream/spdy"
)

// portForward serves kubectl port-forward over SPDY (portforward.k8s.io):
// the client opens a pair of streams per connection, "error" and "data",
// with the same requestID and the pod port in their headers. The kubelet
// connects to localhost:port inside the pod's network namespace, so ports
// a container binds to 127.0.0.1 work too, as upstream.
func (s *Server) portForward(w http.ResponseWriter, r *http.Request) {
	netns, err := s.pods.Sandbox(r.PathValue("ns"), r.PathValue("pod"))
	switch {
	case apierrors.IsNotFound(err):
		http.Error(w, fmt.Sprintf("pod %q not found", r.PathValue("pod")), http.StatusNotFound)
		return
	case err != nil:
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if _, err := httpstream.Handshake(r, w, []string{"portforward.k8s.io"}); err != nil {
		return // Handshake wrote the error
	}
	streams := make(chan httpstream.Stream, 4)
	conn := spdy.NewResponseUpgraderWithPings(30*time.Second).UpgradeResponse(w, r, func(st httpstream.Stream, _ <-chan struct{}) error {
		streams <- st
		return nil
	})
	if conn == nil {
		return
	}
	defer conn.Close()
	conn.SetIdleTimeout(4 * time.Hour)
	pairs := map[string]*streamPair{}
	for {
		select {
		case <-conn.CloseChan():
			return
		case <-r.Context().Done():
			return
		case st := <-streams:
			id := st.Headers().Get(corev1.PortForwardRequestIDHeader)
			p := pairs[id]
			if p == nil {
				p = &streamPair{}
				pairs[id] = p
			}
			switch st.Headers().Get(corev1.StreamType) {
			case corev1.StreamTypeError:
				p.errorStream = st
			case corev1.StreamTypeData:
				p.dataStream = st
			default:
				st.Reset()
				continue
			}
			if p.errorStream != nil && p.dataStream != nil {
				delete(pairs, id)
				go s.forward(netns, p, conn)
			}
		}
	}
}

type streamPair struct{ dataStream, errorStream httpstream.Stream }

func (s *Server) forward(netns string, p *streamPair, conn httpstream.Connection) {
	defer conn.RemoveStreams(p.dataStream, p.errorStream)
	defer p.dataStream.Close()
	portStr := p.dataStream.Headers().Get(corev1.PortHeader)
	port, err := strconv.Atoi(portStr)
	if err != nil || port <= 0 || port > 65535 {
		fmt.Fprintf(p.errorStream, "invalid port %q", portStr)
		p.errorStream.Close()
		return
	}
	var c net.Conn
	dial := func() error {
		var err error
		c, err = net.DialTimeout("tcp4", net.JoinHostPort("127.0.0.1", portStr), 5*time.Second)
		return err
	}
	if netns != "" {
		err = s.network.InNetNS(netns, dial)
	} else {
		err = dial()
	}
	if err != nil {
		fmt.Fprintf(p.errorStream, "error forwarding port %d to pod: %v", port, err)
		p.errorStream.Close()
		return
	}
	p.errorStream.Close()
	defer c.Close()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, _ = io.Copy(c, p.dataStream)
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
	}()
	if _, err := io.Copy(p.dataStream, c); err != nil {
		logrus.WithError(err).Debug("kubelet: port-forward copy")
	}
	wg.Wait()
}
