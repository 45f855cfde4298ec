package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/flashsale/flashsale/auth"
)

// WatchAuth exports the authenticator's counters (auth.Stats), read at
// scrape time: flashsale_auth_refused_total by reason (one label per
// refusal: expired, alg_none, unknown_kid, audience…), the cached tokens
// and subjects, the unknown kids, the failed reads of the provider's
// keys and the provider's tokens checked (the token cache's misses).
func (m *Metrics) WatchAuth(a *auth.Authenticator) { m.reg.MustRegister(authCollector{a}) }

var (
	descAuthRefused  = prometheus.NewDesc("flashsale_auth_refused_total", "User tokens refused with 401, by reason.", []string{"reason"}, nil)
	descAuthTokens   = prometheus.NewDesc("flashsale_auth_cached_tokens", "Verified tokens in the token cache.", nil, nil)
	descAuthSubjects = prometheus.NewDesc("flashsale_auth_cached_subjects", "The identity provider's subjects whose buyer ids are cached.", nil, nil)
	descAuthUnknown  = prometheus.NewDesc("flashsale_auth_unknown_kid_total", "Tokens naming a kid not among the provider's keys as last read (each may refresh them, rate-limited).", nil, nil)
	descAuthFailures = prometheus.NewDesc("flashsale_auth_key_refresh_failures_total", "Failed reads of the identity provider's keys (the keys read before stay in use).", nil, nil)
	descAuthChecked  = prometheus.NewDesc("flashsale_auth_provider_tokens_checked_total", "The identity provider's tokens checked by signature (not answered by the token cache; once for the requests of one token that arrive together).", nil, nil)
)

type authCollector struct{ a *auth.Authenticator }

func (c authCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descAuthRefused, descAuthTokens, descAuthSubjects, descAuthUnknown, descAuthFailures, descAuthChecked} {
		ch <- d
	}
}

func (c authCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.a.Stats()
	for reason, n := range s.Refused {
		ch <- prometheus.MustNewConstMetric(descAuthRefused, prometheus.CounterValue, float64(n), reason)
	}
	ch <- prometheus.MustNewConstMetric(descAuthTokens, prometheus.GaugeValue, float64(s.Tokens))
	ch <- prometheus.MustNewConstMetric(descAuthSubjects, prometheus.GaugeValue, float64(s.Subjects))
	ch <- prometheus.MustNewConstMetric(descAuthUnknown, prometheus.CounterValue, float64(s.UnknownKIDs))
	ch <- prometheus.MustNewConstMetric(descAuthFailures, prometheus.CounterValue, float64(s.KeyRefreshFailures))
	ch <- prometheus.MustNewConstMetric(descAuthChecked, prometheus.CounterValue, float64(s.ProviderTokens))
}
