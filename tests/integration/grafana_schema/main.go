// Command gatewaydashboardcheck checks a Grafana dashboard JSON file against Grafana's own
// dashboard schema as the grafana-foundation-sdk generates it: strict decoding (unknown fields,
// wrong types and missing required fields are errors, also inside panel options, custom field
// configs and Prometheus queries) and the schema's constraints (gridPos bounds, ...).
//
// Usage: gatewaydashboardcheck DASHBOARD.json
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/plugins"
	"github.com/grafana/grafana-foundation-sdk/go/cog/variants"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: gatewaydashboardcheck DASHBOARD.json")
		os.Exit(2)
	}
	path := os.Args[1]
	summary, err := check(path)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: not a valid Grafana dashboard:\n%v\n", path, err)
		os.Exit(1)
	}
	fmt.Printf("%s: valid Grafana dashboard (%s)\n", path, summary)
}

// rawPanel is what the extra checks read of a panel, straight from the file.
type rawPanel struct {
	Type        string                `json:"type"`
	Datasource  *common.DataSourceRef `json:"datasource"`
	FieldConfig json.RawMessage       `json:"fieldConfig"`
	Targets     []json.RawMessage     `json:"targets"`
	Panels      []json.RawMessage     `json:"panels"` // a row's; read from the dashboard itself, its top-level panels
}

func check(path string) (summary string, err error) {
	// The generated decoders are not ours: report a panic in them as an error, not a traceback.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("schema decoder panicked: %v", r)
		}
	}()

	raw, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	// Without the panel and datasource plugins registered, panel options, custom field configs
	// and queries decode into untyped maps and nothing in them is checked.
	plugins.RegisterDefaultPlugins()

	if err := failed(new(dashboard.Dashboard).UnmarshalJSONStrict(raw)); err != nil {
		return "", err
	}
	// The strict decoders of v0.0.22 report "no errors" as a non-nil empty error list, on which
	// callers drop what was decoded (every panel, query and options object). So the constraints
	// are checked on a lenient decode of the same, by now strictly checked, JSON.
	var dash dashboard.Dashboard
	if err := json.Unmarshal(raw, &dash); err != nil {
		return "", err
	}
	if err := failed(dash.Validate()); err != nil {
		return "", err
	}

	var top rawPanel
	if err := json.Unmarshal(raw, &top); err != nil {
		return "", err
	}
	var errs cog.BuildErrors
	rows, visualizations := 0, 0
	for i, rawTop := range top.Panels {
		where := "panels[" + strconv.Itoa(i) + "]"
		var p rawPanel
		if err := json.Unmarshal(rawTop, &p); err != nil {
			return "", err
		}
		if p.Type != "row" {
			visualizations++
			errs = append(errs, checkPanel(where, p)...)
			continue
		}
		rows++
		for j, rawNested := range p.Panels {
			var nested rawPanel
			if err := json.Unmarshal(rawNested, &nested); err != nil {
				return "", err
			}
			visualizations++
			errs = append(errs, checkPanel(where+".panels["+strconv.Itoa(j)+"]", nested)...)
		}
	}
	if len(errs) > 0 {
		return "", errs
	}
	return fmt.Sprintf("%d panels: %d rows, %d visualizations", rows+visualizations, rows, visualizations), nil
}

// checkPanel closes the gaps the SDK's strict Panel decoder leaves: a panel type it has no
// schema for (its options would go unchecked), fieldConfig (decoded leniently there, only its
// `custom` part strictly) and queries whose type it does not find (kept as an untyped bag; it
// never falls back to the panel's datasource either, as that is decoded after the targets).
func checkPanel(where string, p rawPanel) cog.BuildErrors {
	var errs cog.BuildErrors
	if _, found := cog.ConfigForPanelcfgVariant(p.Type); !found {
		errs = append(errs, &cog.BuildError{Path: where + ".type", Message: fmt.Sprintf("no schema for panel type %q", p.Type)})
	}
	if p.FieldConfig != nil {
		if err := failed(new(dashboard.FieldConfigSource).UnmarshalJSONStrict(p.FieldConfig)); err != nil {
			errs = append(errs, cog.MakeBuildErrors(where+".fieldConfig", err)...)
		}
	}
	for i, target := range p.Targets {
		at := where + ".targets[" + strconv.Itoa(i) + "]"
		var own struct {
			Datasource *common.DataSourceRef `json:"datasource"`
		}
		if err := json.Unmarshal(target, &own); err != nil {
			errs = append(errs, cog.MakeBuildErrors(at, err)...)
			continue
		}
		// A query's own datasource decides its type, as in Grafana; else the panel's does.
		kind := datasourceType(own.Datasource)
		if kind == "" {
			kind = datasourceType(p.Datasource)
		}
		query, err := cog.StrictUnmarshalDataquery(target, kind)
		if err = failed(err); err != nil {
			errs = append(errs, cog.MakeBuildErrors(at, err)...)
		} else if _, unknown := query.(variants.UnknownDataquery); unknown {
			errs = append(errs, &cog.BuildError{Path: at, Message: fmt.Sprintf("no schema for queries of datasource type %q", kind)})
		}
	}
	return errs
}

func datasourceType(ref *common.DataSourceRef) string {
	if ref == nil || ref.Type == nil {
		return ""
	}
	return *ref.Type
}

// failed turns the SDK's "no errors" value, an empty cog.BuildErrors, into a nil error.
func failed(err error) error {
	var buildErrs cog.BuildErrors
	if errors.As(err, &buildErrs) && len(buildErrs) == 0 {
		return nil
	}
	return err
}
