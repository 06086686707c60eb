package runtime

import (
	"context"
	"fmt"
)

// Run implements Runner: it runs the program on this host as the runtime's OS user.
func (p *Process) Run(ctx context.Context, job Job) error {
	cmd, err := p.Command(ctx, job.Version, job.Prog, job.Args...)
	if err != nil {
		return err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = job.Stdin, job.Stdout, job.Stderr
	if cmd.Stderr == nil {
		cmd.Stderr = job.Stdout
	}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w", job.Prog, err)
	}
	return nil
}
