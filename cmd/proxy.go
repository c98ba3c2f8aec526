package cmd

import (
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/undolog/undolog/model"
	"github.com/undolog/undolog/policy"
	"github.com/undolog/undolog/proxy"
)

type proxyOptions struct {
	session      string
	policy       string
	approvalWait time.Duration
	inputWait    time.Duration
	redact       []string
	stateEnv     []string
	http         httpOptions
}

// stateEnvOf is what locates the state of the server the proxy starts:
// the policy's state_env, --state-env, and what undolog knows of the
// server command names (policy.KnownStateEnv). A server at --url keeps its
// state where it runs: no variable here locates it.
func (o *proxyOptions) stateEnvOf(pol *policy.Policy, command []string, remote bool) ([]string, error) {
	for _, name := range o.stateEnv {
		if err := model.ValidEnvName(name); err != nil {
			return nil, usagef("--state-env: %v", err)
		}
	}
	names := slices.Clone(o.stateEnv)
	if pol != nil {
		names = append(names, pol.StateEnv...)
	}
	if remote {
		if len(names) > 0 {
			return nil, usagef("state_env and --state-env name variables of a server undolog starts; the server at --url keeps its state where it runs")
		}
		return nil, nil
	}
	names = append(names, policy.KnownStateEnv(command)...)
	slices.Sort(names)
	return slices.Compact(names), nil
}

func newCmdProxy(f *Factory) *cobra.Command {
	opts := &proxyOptions{}
	c := &cobra.Command{
		Use:   "proxy [--session S] [--policy FILE] [--listen ADDR] (--url URL [--header NAME=ENV_VAR]... | -- SERVER_CMD [ARGS...])",
		Short: "Put an MCP server behind the effect log (MCP over stdio or Streamable HTTP)",
		Long: `Start an MCP server and speak MCP over stdio to both the client and the server
(or over Streamable HTTP: --url, --listen, below).
Everything but tools/call passes through unchanged. Each tools/call is classified
by the policy (a YAML file of tool names or globs, each with a tier, an optional
capture call and a compensate call); a tool with no entry is safe when the server
annotates it readOnlyHint, else irreversible (fail closed).

Compensable calls are logged before they run, with their compensation. A repeat
is answered from the log without reaching the server when it is a retry (the
same call still runs, or its answer never reached the client); a repeat after
the client got its answer runs again, unless the tool's policy rule says
replay: always. Irreversible calls
wait up to --approval-wait for 'undolog approve ID'; if no decision comes, the
client gets a tool error naming the effect and asking to retry the same call.
A tool whose rule says approve_in_client: true is also asked about in the
client's own window (MCP elicitation), when the client can show one: accept
approves, decline rejects, recorded as client-user:CLIENT_NAME.
'undolog undo SESSION' starts the recorded server again and runs the
compensations last-in-first-out.

The environment variables that locate the server's state (the policy's
state_env, --state-env, and MEMORY_FILE_PATH for the memory server, which
undolog knows) are recorded in the session with their values, or as unset;
no other variable is recorded. Undo acts on that state or refuses.

The session is made on the first logged call. One that has ended (completed,
failed, undone) gets a successor, SESSION.2, SESSION.3, ..., so calls go on; one
a rejection halted takes no calls until a person runs
'undolog session resume SESSION --reason TEXT'.

--url fronts a remote server over Streamable HTTP instead of starting one;
each --header NAME=ENV_VAR sends the header NAME with the value of the
environment variable ENV_VAR (the log records the URL and the names, never a
value; undo reads the variables again). --listen 127.0.0.1:PORT serves MCP
clients over Streamable HTTP at http://127.0.0.1:PORT/mcp instead of stdio:
each client session gets its own upstream (a server process, or an HTTP
session). A call left in doubt is reclaimed by a person: undolog resolve ID.

` + exitCodesHelp("Exit codes:", proxyExitCodes),
		Example: `  undolog proxy --policy ~/policies/memory.yaml -- npx -y @modelcontextprotocol/server-memory@2026.8.31
  undolog proxy --url https://mcp.example.com/mcp --header Authorization=EXAMPLE_AUTH
  undolog proxy --listen 127.0.0.1:8931 --policy ~/policies/memory.yaml -- npx -y @modelcontextprotocol/server-memory@2026.8.31

  Pin the server's version: undo starts the recorded command again, and npx of an
  unpinned package may fetch another one.`,
		Args: func(c *cobra.Command, args []string) error {
			return opts.http.checkArgs(args)
		},
		RunE: func(c *cobra.Command, args []string) error {
			f.handleInterrupts() // it waits, or runs other commands
			var pol *policy.Policy
			if opts.policy != "" {
				p, err := policy.LoadPolicy(opts.policy)
				if err != nil {
					return usagef("%v", err)
				}
				if r := p.FilesRule(); r != nil {
					return usagef("%s: %s says compensate: files, which undolog hook does (it captures the files a call changes); the proxy captures none: say how to undo it (docs/policy.md)", opts.policy, r.Pattern)
				}
				pol = p
			}
			lease, err := f.Lease()
			if err != nil {
				return err
			}
			upstream, remote, err := opts.http.upstream(f, args)
			if err != nil {
				return err
			}
			stateEnv, err := opts.stateEnvOf(pol, args, remote != nil)
			if err != nil {
				return err
			}
			store := f.Log()
			if opts.http.listen != "" {
				return proxyListen(c.Context(), f, opts, pol, lease, upstream, stateEnv, remote)
			}
			if remote != nil {
				if err := remote.reachable(c.Context()); err != nil {
					return err
				}
			}
			// The session is made on the first logged call (proxy/session.go):
			// a proxy that logs nothing writes nothing.
			pinned, err := opts.pinnedSession(f)
			if err != nil {
				return err
			}
			session, made := sessionOrNew(pinned, f.Now())
			// Undo starts the server where it ran: a relative path in its
			// command names the same directory then.
			dir, err := os.Getwd()
			if err != nil {
				return err
			}
			fmt.Fprintf(f.ErrOut, "undolog proxy: session %s%s\n", session, made)
			redact := opts.redact
			if pol != nil {
				redact = append(redact, pol.Redact...)
			}
			p := &proxy.Proxy{Log: store, Session: session, Policy: pol, ApprovalWait: opts.approvalWait, InputWait: opts.inputWait, Redact: redact, Diagnostics: f.ErrOut, Now: f.Now, Lease: lease, CLI: f.CLI(),
				Dir: dir, SessionActor: f.Actor(""), Upstream: upstream, StateEnv: stateEnv}
			ignoreBrokenPipe()
			if remote != nil {
				return proxyEnd(p.Serve(c.Context(), proxy.NewStdioConn(f.In, f.Out), remote.dial(f)))
			}
			return proxyEnd(p.Run(c.Context(), args, f.In, f.Out))
		},
	}
	c.Flags().SetInterspersed(false)
	c.Flags().StringVar(&opts.session, "session", "", "session id (default $UNDOLOG_SESSION, else a new name printed on stderr); made on the first logged call")
	c.Flags().StringVar(&opts.policy, "policy", "", "policy `file` (YAML); without one, read-only tools are safe and the rest irreversible")
	durationVar(c.Flags(), &opts.approvalWait, "approval-wait", proxy.DefaultApprovalWait, "how long an irreversible call waits for a decision before asking the client to retry")
	durationVar(c.Flags(), &opts.inputWait, "input-wait", proxy.DefaultInputWait, "how long a logged call whose server asked the client for input (MCP 2026-07-28) waits for the client's next round before it is failed")
	c.Flags().StringArrayVar(&opts.stateEnv, "state-env", nil, "an environment `variable` that locates the server's state (as the policy's state_env): each session records its value here, and undo acts on that state or refuses")
	c.Flags().StringArrayVar(&opts.redact, "redact", nil, "keep matching fields of arguments and results out of the log (*.password, *token*); adds to the policy's redact list")
	opts.http.flags(c)
	return c
}
