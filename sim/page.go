package sim

import (
	"html/template"
	"net/http"
	"slices"

	"github.com/payhook/payhook/sim/deliver"
)

// pageTemplate shows each environment's endpoints and their latest
// deliveries. The page holds no secret and no API key.
var pageTemplate = template.Must(template.New("page").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>payhook sim</title>
<style>body{font:14px system-ui,sans-serif;margin:2em}table{border-collapse:collapse;margin-bottom:1.5em}
td,th{border:1px solid #ccc;padding:2px 8px;text-align:left}.fail{color:#a00}</style></head><body>
<h1>payhook sim — flavour {{.Flavour}}</h1>
{{range .Envs}}<h2>{{.Name}} environment</h2>
{{range .Endpoints}}<h3>{{.Endpoint.ID}} → {{.Endpoint.URL}}</h3>
<p>events {{.Endpoint.Events}}, api version {{.Endpoint.APIVersion}}</p>
<table><tr><th>at</th><th>delivery</th><th>event</th><th>type</th><th>attempt</th><th>status</th><th>latency</th><th>answer</th></tr>
{{range .Attempts}}<tr{{if .Error}} class="fail"{{end}}><td>{{.At.Format "15:04:05.000"}}</td><td>{{.DeliveryID}}</td><td>{{.EventID}}</td>
<td>{{.EventType}}</td><td>{{.N}}</td><td>{{.Status}}</td><td>{{.Latency}}</td><td>{{.Response}}{{.Error}}</td></tr>
{{end}}</table>
{{else}}<p>No endpoints. Create one with POST /webhook_endpoints.</p>{{end}}
{{end}}</body></html>`))

// pageLimit is how many of the latest attempts the page shows per endpoint.
const pageLimit = 50

// Page returns an HTML page listing each environment's endpoints and
// their latest delivery attempts, newest first, for people running
// payhook sim serve. It needs no API key and shows no secret.
func (p *Provider) Page() http.Handler {
	type endpointView struct {
		Endpoint Endpoint
		Attempts []deliver.Attempt
	}
	type envView struct {
		Name      string
		Endpoints []endpointView
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var envs []envView
		for _, env := range []string{EnvTest, EnvLive} {
			eps, err := p.Endpoints(env)
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			v := envView{Name: env}
			for _, ep := range eps {
				log, _ := p.Deliveries(env, ep.ID)
				slices.Reverse(log)
				v.Endpoints = append(v.Endpoints, endpointView{Endpoint: ep, Attempts: log[:min(len(log), pageLimit)]})
			}
			envs = append(envs, v)
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		pageTemplate.Execute(w, map[string]any{"Flavour": p.cfg.Flavour.Name(), "Envs": envs})
	})
}
