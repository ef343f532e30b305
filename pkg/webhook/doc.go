// Package webhook is dnsconfigurer's validating admission webhook: it moves
// pod DNS failures the API server accepts to `kubectl apply`.
//
// Some are failures the node then hits: a setHostnameAsFQDN FQDN over 64
// characters, an autopath annotation the pod cannot use. Others the node
// silently works around: a merged search list or nameserver list over
// kubelet's limits.
//
// The decisions are pkg/policy's, the engine of `dnsconfigurer validate
// --strict`: Engine.ValidateNode with the node settings the webhook is
// configured to assume, per node pool (Reviewer, built from a
// WebhookConfiguration by NewReviewer). Errors deny the pod with
// one status cause per violation, carrying its field path; trims are
// AdmissionResponse warnings, or denials when the Reviewer says so. With a
// cluster policy in the engines (Reviewer.ClusterPolicy), an allowed pod the
// policy changes gets a warning saying what it will get (PolicyWarning).
//
// Server serves admission.k8s.io/v1 AdmissionReviews for Pods on POST
// /validate, and internal/health's GET /healthz, /readyz and /metrics. It
// serves HTTPS only (TLS 1.2 or later). A request body is capped at 6 MiB:
// twice kube-apiserver's 3 MiB request limit, since the review wraps the
// object. A budget bounds the body bytes held at once (12 MiB by default).
// HTTP/2 receive buffers are 64 KiB per connection and stream, and there are
// read and write timeouts. A body takes bytes from the budget as they
// arrive, never by its Content-Length: its buffer doubles when full, so it
// holds at most twice what it has sent. A body that waits for budget waits
// its turn for half the read timeout in all, and waiters may hold at most
// half the budget, so they never wait for each other forever. Each 64 KiB of
// a body must arrive within the body progress timeout (2 s), the whole body
// within the read timeout. With a client CA (WithClientCAFile), /validate
// answers only clients with a certificate it signed. The certificate and key
// are re-read when their files change (internal/filewatch: fsnotify on their
// directories, which also sees a Secret volume's symlink swap, and a stat
// poll); each new TLS handshake takes the latest good pair, so established
// connections are not dropped, and a pair that does not load is logged and
// leaves the previous one in place.
//
// HTTP errors: 405 for a method other than POST on /validate; 415 for a body
// that is not application/json; 403 without a client certificate when one is
// required; 413 for a body over the cap. A body that found the in-flight
// budget spent is 429 with Retry-After, and one that arrived too slowly is
// 408. Anything that is not a well-formed AdmissionReview with a request is
// 400 with the reason. JSON is read as the API server writes it
// (podspec.Unmarshal): a key repeated where the webhook reads is a 400, a
// key in another case is not read. The pod templates of workloads (podspec.Templates'
// kinds) are checked on CREATE and UPDATE on their full field paths; an
// UPDATE that keeps a template's DNS fields only warns. An AdmissionReview
// for anything else is allowed with a warning saying that nothing was
// checked.
//
// The package imports k8s.io/api types but not client-go: it never calls the
// API server. Its defaults are api/v1alpha1's. Logging is an injected *slog.Logger and metrics go to an
// injected prometheus.Registerer (see metrics.go for the list).
package webhook
