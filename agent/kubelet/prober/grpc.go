package prober

import (
	"context"
	"fmt"
	"net"
	"strconv"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
)

// grpcCheck is upstream's gRPC probe: the standard health service
// (grpc.health.v1.Health/Check) at the pod's IP and the probe's port,
// without TLS, asking for the probe's service (empty: the server as a
// whole); SERVING is success. ctx carries the probe's timeout.
func grpcCheck(ctx context.Context, t Target, port int32, service *string) error {
	addr := net.JoinHostPort(t.PodIP, strconv.Itoa(int(port)))
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithUserAgent("kube-probe/kelp"))
	if err != nil {
		return fmt.Errorf("failed to connect service %q: %v", addr, err)
	}
	defer conn.Close()
	req := &healthpb.HealthCheckRequest{}
	if service != nil {
		req.Service = *service
	}
	ctx = metadata.NewOutgoingContext(ctx, metadata.Pairs("user-agent", "kube-probe/kelp"))
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, req)
	if err != nil {
		return fmt.Errorf("health rpc to %s failed: %v", addr, err)
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return fmt.Errorf("service unhealthy (responded with %q)", resp.GetStatus().String())
	}
	return nil
}
