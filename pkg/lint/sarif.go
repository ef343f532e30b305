package lint

import (
	"encoding/json"
	"io"
	"net/url"
	"path/filepath"
	"strings"
)

// SARIF 2.1.0: the subset of the OASIS schema we write.
const (
	sarifVersion = "2.1.0"
	sarifSchema  = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)

type sarifLog struct {
	Schema  string     `json:"$schema"`
	Version string     `json:"version"`
	Runs    []sarifRun `json:"runs"`
}

type sarifRun struct {
	Tool        sarifTool         `json:"tool"`
	Invocations []sarifInvocation `json:"invocations"`
	Results     []sarifResult     `json:"results"`
}

// sarifInvocation says whether the run could read its input, and what
// it skipped.
type sarifInvocation struct {
	ExecutionSuccessful bool                `json:"executionSuccessful"`
	Notifications       []sarifNotification `json:"toolExecutionNotifications,omitempty"`
}

// sarifNotification is a level, a message and where: a notification of
// the run, and the body of each result.
type sarifNotification struct {
	Level     string          `json:"level"`
	Message   sarifText       `json:"message"`
	Locations []sarifLocation `json:"locations,omitempty"`
}

type sarifTool struct {
	Driver sarifDriver `json:"driver"`
}

type sarifDriver struct {
	Name           string      `json:"name"`
	InformationURI string      `json:"informationUri"`
	Version        string      `json:"version,omitempty"`
	Rules          []sarifRule `json:"rules"`
}

type sarifText struct {
	Text string `json:"text"`
}

type sarifRule struct {
	ID               string         `json:"id"`
	Name             string         `json:"name"`
	ShortDescription sarifText      `json:"shortDescription"`
	Default          sarifRuleLevel `json:"defaultConfiguration"`
}

type sarifRuleLevel struct {
	Level string `json:"level"`
}

// sarifResult is a finding: its rule, then its level, message and
// location (one, so "locations" is never left out).
type sarifResult struct {
	RuleID    string `json:"ruleId"`
	RuleIndex int    `json:"ruleIndex"`
	sarifNotification
}

type sarifLocation struct {
	Physical sarifPhysical  `json:"physicalLocation"`
	Logical  []sarifLogical `json:"logicalLocations,omitempty"`
}

type sarifPhysical struct {
	Artifact sarifArtifact `json:"artifactLocation"`
	Region   *sarifRegion  `json:"region,omitempty"`
}

type sarifArtifact struct {
	URI string `json:"uri"`
}

type sarifRegion struct {
	StartLine int `json:"startLine"`
}

type sarifLogical struct {
	FullyQualifiedName string `json:"fullyQualifiedName"`
	Kind               string `json:"kind"`
}

// rules are the SARIF rules, in ruleIndex order.
var rules = []sarifRule{
	{ID: RuleAPI, Name: "APIServerRejects", ShortDescription: sarifText{"The API server refuses a pod with this DNS setting, or refuses the object whole (no kind, a field of the wrong type, too large)."}, Default: sarifRuleLevel{"error"}},
	{ID: RuleNode, Name: "NodeFailsSandbox", ShortDescription: sarifText{"kubelet fails the pod sandbox with this DNS setting."}, Default: sarifRuleLevel{"error"}},
	{ID: RuleTrim, Name: "NodeTrims", ShortDescription: sarifText{"kubelet silently trims this DNS setting."}, Default: sarifRuleLevel{"error"}},
	{ID: RuleWarning, Name: "AcceptedWithWarning", ShortDescription: sarifText{"The API server warns about this DNS setting, or kubelet applies it with a warning (an Event or a log line)."}, Default: sarifRuleLevel{"warning"}},
}

func ruleIndex(id string) int {
	for i, r := range rules {
		if r.ID == id {
			return i
		}
	}
	return -1
}

// WriteSARIF prints the report as a SARIF 2.1.0 log: one result per
// finding, located at its file and the line of its field (or of the
// field's nearest parent in the manifest, or of its document).
// The skipped kinds are a note of the run's invocation.
func (r Report) WriteSARIF(w io.Writer, version string) error {
	run := newSARIFRun(version, true)
	if k := r.Summary.Kinds(); k != "" {
		run.Invocations[0].Notifications = []sarifNotification{{Level: "note", Message: sarifText{k}}}
	}
	for _, res := range r.Results {
		for _, f := range res.Findings {
			run.Results = append(run.Results, sarifFinding(res, f))
		}
	}
	return writeSARIF(w, run)
}

// WriteSARIFError prints a SARIF 2.1.0 log for a run that could not read
// its input: no results, and msg as the invocation's error, at file when
// it is known. A code review then shows the failure, not an empty file.
func WriteSARIFError(w io.Writer, version, msg, file string) error {
	run := newSARIFRun(version, false)
	n := sarifNotification{Level: "error", Message: sarifText{msg}}
	if file != "" {
		n.Locations = []sarifLocation{{Physical: sarifPhysical{Artifact: sarifArtifact{URI: fileURI(file)}}}}
	}
	run.Invocations[0].Notifications = []sarifNotification{n}
	return writeSARIF(w, run)
}

func newSARIFRun(version string, ok bool) sarifRun {
	return sarifRun{Tool: sarifTool{Driver: sarifDriver{Name: "dnsconfigurer",
		InformationURI: "https://github.com/dnsconfigurer/dnsconfigurer", Version: version, Rules: rules}},
		Invocations: []sarifInvocation{{ExecutionSuccessful: ok}}, Results: []sarifResult{}}
}

func writeSARIF(w io.Writer, run sarifRun) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(sarifLog{Schema: sarifSchema, Version: sarifVersion, Runs: []sarifRun{run}})
}

func sarifFinding(res Result, f Finding) sarifResult {
	level := "error"
	if !f.Fails() {
		level = "warning"
	}
	msg := f.Message
	if f.Field != "" {
		msg = f.Field + ": " + msg
	}
	kind := res.Kind
	if kind == "" {
		kind = "object"
	}
	loc := sarifLocation{Physical: sarifPhysical{Artifact: sarifArtifact{URI: fileURI(res.File)}},
		Logical: []sarifLogical{{FullyQualifiedName: kind + "/" + res.Namespace + "/" + res.Name + "/" + f.Field, Kind: "member"}}}
	if line := f.Line; line > 0 {
		loc.Physical.Region = &sarifRegion{StartLine: line}
	} else if res.Line > 0 {
		loc.Physical.Region = &sarifRegion{StartLine: res.Line}
	}
	return sarifResult{RuleID: f.Rule, RuleIndex: ruleIndex(f.Rule), sarifNotification: sarifNotification{Level: level,
		Message: sarifText{kind + " " + res.Namespace + "/" + res.Name + ": " + msg}, Locations: []sarifLocation{loc}}}
}

// fileURI is a relative URI for a relative path, a file URI for an
// absolute one.
func fileURI(path string) string {
	p := filepath.ToSlash(path)
	if filepath.IsAbs(path) {
		return (&url.URL{Scheme: "file", Path: p}).String()
	}
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}
