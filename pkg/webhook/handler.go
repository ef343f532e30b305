package webhook

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dnsconfigurer/dnsconfigurer/internal/health"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/podspec"
)

// Paths served: /validate, and internal/health's operational endpoints.
const (
	PathValidate = "/validate"
	PathHealthz  = health.PathHealthz
	PathReadyz   = health.PathReadyz
	PathMetrics  = health.PathMetrics
)

// handler serves /validate and, through health.Handler, /healthz, /readyz
// and (with a gatherer) /metrics.
type handler struct {
	reviewer *Reviewer
	maxBytes int64
	// budget bounds the body bytes held at once; body says how long a
	// body may wait for it and take to arrive.
	budget *byteBudget
	body   bodyRules
	// clientAuth refuses /validate to a client without a certificate
	// signed by the client CA.
	clientAuth bool
	log        *slog.Logger
	m          *metrics
	ops        http.Handler
}

// statusWriter records the status code for the request metric.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the connection's deadlines.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (h *handler) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	w := &statusWriter{ResponseWriter: rw}
	path := r.URL.Path
	label := path
	defer func() {
		if p := recover(); p != nil {
			// A bug, not a request problem: answer 500 and keep serving.
			h.log.Error("panic while serving a request", "path", path, "panic", fmt.Sprint(p))
			if w.code == 0 {
				http.Error(w, "internal error", http.StatusInternalServerError)
			}
			w.code = http.StatusInternalServerError
		}
		h.m.requests.WithLabelValues(label, strconv.Itoa(w.code)).Inc()
	}()
	switch {
	case path == PathValidate:
		h.validate(w, r)
	case path == PathHealthz || path == PathReadyz || path == PathMetrics:
		h.ops.ServeHTTP(w, r)
	default:
		label = "other"
		http.NotFound(w, r)
	}
}

func (h *handler) validate(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, fmt.Sprintf("method %s not allowed: POST an admission.k8s.io/v1 AdmissionReview", r.Method), http.StatusMethodNotAllowed)
		return
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		http.Error(w, fmt.Sprintf("Content-Type %q not supported: the AdmissionReview must be application/json", r.Header.Get("Content-Type")), http.StatusUnsupportedMediaType)
		return
	}
	if h.clientAuth && (r.TLS == nil || len(r.TLS.VerifiedChains) == 0) {
		h.refuse(w, r, http.StatusForbidden, "a client certificate signed by the webhook's client CA is required")
		return
	}
	if r.ContentLength > h.maxBytes {
		h.refuse(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body of %d bytes is over the limit of %d", r.ContentLength, h.maxBytes))
		return
	}
	// The body's bytes are taken from the budget as they arrive, and given
	// back once the review is answered: that bounds the memory concurrent
	// bodies hold, whatever their number, and a slow body holds little.
	b := newBodyReader(r.Body, r.ContentLength, h.budget, h.body, http.NewResponseController(w))
	err := b.read(r.Context())
	defer h.budget.release(b.held)
	if err != nil {
		h.bodyError(w, r, err)
		return
	}
	review, err := decodeReview(b.buf)
	if err != nil {
		h.badRequest(w, r, err)
		return
	}
	resp, outcome, vs, err := h.reviewer.Review(review.Request)
	if err != nil {
		h.badRequest(w, r, err)
		return
	}
	// Counted before the reply leaves: a client holding its answer finds
	// the review in the metrics.
	h.m.review(outcome, vs, time.Since(start))
	h.respond(w, review, resp)
	if outcome == OutcomeDenied {
		fields := make([]string, 0, len(vs))
		for _, v := range vs {
			if v.Deny {
				fields = append(fields, v.Field)
			}
		}
		h.log.Info("pod denied", "uid", review.Request.UID, "namespace", review.Request.Namespace,
			"pod", review.Request.Name, "fields", fields)
	}
}

// bodyError answers a body that could not be read.
func (h *handler) bodyError(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, errBudgetWait):
		w.Header().Set("Retry-After", "1")
		h.refuse(w, r, http.StatusTooManyRequests, fmt.Sprintf("too many request bytes in flight: the body waited %v for its share; retry", h.body.queue))
	case errors.Is(err, errBodySlow):
		h.log.Warn("request body too slow", "remote", r.RemoteAddr, "err", err)
		h.refuse(w, r, http.StatusRequestTimeout, err.Error())
	case errors.Is(err, errBodyLarge):
		h.refuse(w, r, http.StatusRequestEntityTooLarge, err.Error())
	default:
		h.refuse(w, r, http.StatusBadRequest, "reading the request body: "+err.Error())
	}
}

// refuse answers code without reading the rest of the body. An HTTP/1
// connection is closed after it rather than drained for the next request.
func (h *handler) refuse(w http.ResponseWriter, r *http.Request, code int, msg string) {
	if r.ProtoMajor == 1 {
		w.Header().Set("Connection", "close")
	}
	http.Error(w, msg, code)
}

func (h *handler) badRequest(w http.ResponseWriter, r *http.Request, err error) {
	h.log.Warn("bad admission request", "remote", r.RemoteAddr, "err", err)
	http.Error(w, err.Error(), http.StatusBadRequest)
}

// wireReview is the part of an AdmissionReview the webhook reads. Its
// userInfo, options and dryRun are not decoded: anyone who can reach the
// webhook could fill their lists and maps, and nothing here reads them.
type wireReview struct {
	metav1.TypeMeta `json:",inline"`
	Request         *struct {
		UID         types.UID                   `json:"uid"`
		Kind        metav1.GroupVersionKind     `json:"kind"`
		Resource    metav1.GroupVersionResource `json:"resource"`
		SubResource string                      `json:"subResource"`
		Name        string                      `json:"name"`
		Namespace   string                      `json:"namespace"`
		Operation   admissionv1.Operation       `json:"operation"`
		Object      podspec.RawJSON             `json:"object"`
		OldObject   podspec.RawJSON             `json:"oldObject"`
	} `json:"request"`
}

// decodeReview checks that body is an admission.k8s.io/v1 AdmissionReview
// and decodes the fields the reviewer reads, as the API server writes
// them (podspec.Unmarshal: a repeated "request" or "object" is refused).
func decodeReview(body []byte) (*admissionv1.AdmissionReview, error) {
	var w wireReview
	if err := podspec.Unmarshal(body, &w); err != nil {
		return nil, badRequest("the body is not a JSON AdmissionReview: %s", oneLine(err))
	}
	if w.APIVersion != admissionv1.SchemeGroupVersion.String() || w.Kind != "AdmissionReview" {
		return nil, badRequest("the body is apiVersion %q kind %q; an admission.k8s.io/v1 AdmissionReview is expected", w.APIVersion, w.Kind)
	}
	review := &admissionv1.AdmissionReview{TypeMeta: w.TypeMeta}
	if r := w.Request; r != nil {
		review.Request = &admissionv1.AdmissionRequest{UID: r.UID, Kind: r.Kind, Resource: r.Resource, SubResource: r.SubResource,
			Name: r.Name, Namespace: r.Namespace, Operation: r.Operation,
			Object: runtime.RawExtension{Raw: r.Object}, OldObject: runtime.RawExtension{Raw: r.OldObject}}
	}
	return review, nil
}

func (h *handler) respond(w http.ResponseWriter, in *admissionv1.AdmissionReview, resp *admissionv1.AdmissionResponse) {
	out := admissionv1.AdmissionReview{TypeMeta: in.TypeMeta, Response: resp}
	data, err := json.Marshal(out)
	if err != nil {
		h.log.Error("encode AdmissionReview response", "err", err)
		http.Error(w, "encode response: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.Write(data)
}
