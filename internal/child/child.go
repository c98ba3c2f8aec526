// Package child sets up the commands undolog runs for a person or an agent
// (exec's command, undo's compensation commands) so that they do not outlive
// undolog: a command left running after its undolog was killed would run
// again, concurrently, under the next --retry-in-doubt.
package child
