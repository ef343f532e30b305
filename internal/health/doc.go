// Package health serves the operational endpoints every dnsconfigurer
// component has, the same way everywhere:
//
//   - GET /healthz: "ok" while the process serves (liveness);
//   - GET /readyz: "ok" when every readiness check passes, else 503 with
//     the first failing check's message (the DNS records synced, the
//     runtime connected, the pod informer synced);
//   - GET /metrics: the component's Prometheus registry (when one is given).
//
// Handler builds the routes (the webhook mounts them on its HTTPS server);
// Listen and Server.Run serve them on a plain listener of their own with
// bounded timeouts and a bounded graceful shutdown.
package health
