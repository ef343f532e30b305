package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"time"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/dnsconfigurer/dnsconfigurer/internal/health"
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
	// budget bounds the body bytes being read and decoded at once; a
	// request waits for its share at most queueTimeout.
	budget       *byteBudget
	queueTimeout time.Duration
	log          *slog.Logger
	m            *metrics
	ops          http.Handler
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
	if r.ContentLength > h.maxBytes {
		http.Error(w, fmt.Sprintf("request body of %d bytes is over the limit of %d", r.ContentLength, h.maxBytes), http.StatusRequestEntityTooLarge)
		return
	}
	// The body's bytes are taken from the budget before it is read, and
	// given back once the review is answered: that bounds the memory that
	// concurrent large bodies hold, whatever their number.
	weight := r.ContentLength
	if weight < 0 {
		weight = h.maxBytes // unknown length: the most it can be
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.queueTimeout)
	err := h.budget.acquire(ctx, weight)
	cancel()
	if err != nil {
		w.Header().Set("Retry-After", "1")
		http.Error(w, fmt.Sprintf("too many request bytes in flight: a body of %d bytes waited %v for its turn; retry", weight, h.queueTimeout), http.StatusTooManyRequests)
		return
	}
	defer h.budget.release(weight)
	body, err := readBody(w, r, h.maxBytes)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			http.Error(w, fmt.Sprintf("request body is over the limit of %d bytes", h.maxBytes), http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "reading the request body: "+err.Error(), http.StatusBadRequest)
		return
	}
	review, err := decodeReview(body)
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

// readBody reads the request body, at most limit bytes, into a buffer sized
// from Content-Length when the request has one, so that the body is held
// once rather than in a growing series of copies.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	var buf bytes.Buffer
	if r.ContentLength > 0 {
		buf.Grow(int(min(r.ContentLength, limit)) + bytes.MinRead)
	}
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, limit))
	return buf.Bytes(), err
}

func (h *handler) badRequest(w http.ResponseWriter, r *http.Request, err error) {
	h.log.Warn("bad admission request", "remote", r.RemoteAddr, "err", err)
	http.Error(w, err.Error(), http.StatusBadRequest)
}

// decodeReview checks that body is an admission.k8s.io/v1 AdmissionReview.
func decodeReview(body []byte) (*admissionv1.AdmissionReview, error) {
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &review); err != nil {
		return nil, badRequest("the body is not a JSON AdmissionReview: %s", oneLine(err))
	}
	if review.APIVersion != admissionv1.SchemeGroupVersion.String() || review.Kind != "AdmissionReview" {
		return nil, badRequest("the body is apiVersion %q kind %q; an admission.k8s.io/v1 AdmissionReview is expected", review.APIVersion, review.Kind)
	}
	return &review, nil
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
