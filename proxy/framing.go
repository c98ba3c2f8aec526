package proxy

import (
	"encoding/json"
	"errors"
)

// clientTooBig answers a client message over maxLine, which was not passed
// on: the proxy goes on with the next one. The reply has the message's id
// when its first bytes say it, so a request gets its answer.
func (p *Proxy) clientTooBig(err error) {
	var big *TooLargeError
	if !errors.As(err, &big) {
		return
	}
	p.note("a client message over 64 MiB was refused (id %s)", idOrNone(big.ID))
	if big.Request && len(big.ID) == 0 {
		return // a notification: nothing to answer
	}
	p.writeClient(errorResponse(big.ID, codeInvalidRequest, "invalid request: the message is over 64 MiB, the proxy's limit; it was not passed on"))
}

// upstreamSkipped drops a server message over maxLine, or handles an answer
// the transport lost: a request of the server's is answered with an error,
// an answer to the client becomes an error for that id, and one the proxy
// waits for is lost as if the server had gone (a logged call stays in
// doubt, for the server may have acted on it).
func (p *Proxy) upstreamSkipped(err error) {
	var big *TooLargeError
	var lost *LostError
	var id json.RawMessage
	text := "the upstream server's answer is over 64 MiB, the proxy's limit; it was dropped"
	switch {
	case errors.As(err, &big):
		p.note("a server message over 64 MiB was dropped (id %s)", idOrNone(big.ID))
		if big.Request && len(big.ID) > 0 {
			p.writeUpstream(errorResponse(big.ID, codeInvalidRequest, "invalid request: the message is over 64 MiB, the proxy's limit"))
			return
		}
		id = big.ID
	case errors.As(err, &lost):
		p.note("the answer to %s was lost: %s", idOrNone(lost.ID), lost.Reason)
		id, text = lost.ID, lost.Reason+"; it may have run"
	}
	if len(id) == 0 {
		return
	}
	p.waitMu.Lock()
	ch, ours := p.waiting[string(id)]
	delete(p.waiting, string(id))
	p.waitMu.Unlock()
	if ours {
		// As when the server is gone: a logged call it answered stays
		// executing (in doubt), for it may have had its effect.
		close(ch)
		return
	}
	p.writeClient(errorResponse(id, codeInternal, text))
}

func idOrNone(id json.RawMessage) string {
	if len(id) == 0 {
		return "none"
	}
	return string(id)
}
