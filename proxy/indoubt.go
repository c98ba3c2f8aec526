package proxy

import "github.com/undolog/undolog/lifecycle"

// resolveHint names what a person does about a call in doubt.
func (p *Proxy) resolveHint(id uint64) string { return lifecycle.ResolveHint(p.cli(), id) }
