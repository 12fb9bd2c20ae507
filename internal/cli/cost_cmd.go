package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"

	"crawlq/internal/cost"
)

// costCmd is `crawlq cost`: the cost model of internal/cost, printed term by term.
func costCmd() *Command {
	return &Command{
		Name: "cost", Synopsis: "what a million pages and a month of the AWS stack cost, term by term", Usage: "[--page-kb 100] [--pages-per-month N] [--stack fargate|lambda|both]",
		Help: `Prints the cost per million pages and per month, term by term (compute, public IPv4,
NAT/egress, RDS, RDS Proxy, logs, S3), with crawl jobs on the Fargate Spot runner fleet in
public subnets (spiders declared runtime: ecs; fetched bytes come in through the internet
gateway, free) and with crawl jobs on worker Lambdas in private subnets (runtime: lambda, the
spider default; every fetched byte pays NAT processing, and cross-zone transfer to a single NAT
gateway). Both share the stack's fixed costs. "per million" is the cost that grows with
pages; "fixed/month" runs whether or not anything is crawled; "all-in" spreads the month's
fixed costs over --pages-per-month. Prices are public us-east-1 list prices, named constants in
internal/cost with the date they were read; the crawl rates assumed per task and per worker
are in internal/cost's DefaultStack and LambdaStack.`,
		Flags: func(fs *flag.FlagSet, env *Env) func(context.Context, []string) error {
			pageKB := fs.Float64("page-kb", 100, "average page size in KB")
			perMonth := fs.Float64("pages-per-month", 100e6, "pages crawled per month (for the monthly and all-in figures)")
			logBytes := fs.Float64("log-bytes-per-page", 100, "log bytes written per page (CloudWatch Logs)")
			which := fs.String("stack", "both", "fargate, lambda or both")
			return func(ctx context.Context, args []string) error {
				if *pageKB < 0 || *perMonth < 0 || *logBytes < 0 {
					return usageErr("--page-kb, --pages-per-month and --log-bytes-per-page must not be negative")
				}
				var stacks []cost.Stack
				switch *which {
				case "fargate":
					stacks = []cost.Stack{cost.DefaultStack()}
				case "lambda":
					stacks = []cost.Stack{cost.LambdaStack()}
				case "both":
					stacks = []cost.Stack{cost.DefaultStack(), cost.LambdaStack()}
				default:
					return usageErr("--stack %q: want fargate, lambda or both", *which)
				}
				w := cost.Workload{PageKB: *pageKB, PagesPerMonth: *perMonth, LogBytesPerPage: *logBytes}
				fmt.Fprintf(env.Stdout, "crawlq on AWS at %.0f KB/page, %.0f pages/month; us-east-1 list prices of %s\n",
					w.PageKB, w.PagesPerMonth, cost.PricesDate)
				for _, s := range stacks {
					e, err := cost.Compute(s, w)
					if err != nil {
						return usageErr("%v", err)
					}
					printEstimate(env.Stdout, e)
				}
				return nil
			}
		},
	}
}

func printEstimate(out io.Writer, e cost.Estimate) {
	fmt.Fprintf(out, "\n%s\n", e.Stack.Name)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "term\tper million pages\tfixed/month\tper month\t")
	for _, t := range e.Terms {
		fmt.Fprintf(tw, "%s\t$%.3f\t$%.2f\t$%.2f\t\n", t.Name, t.PerMillion, t.FixedPerMonth, t.FixedPerMonth+t.PerMillion*e.Workload.PagesPerMonth/1e6)
	}
	fmt.Fprintf(tw, "total\t$%.3f\t$%.2f\t$%.2f\t\n", e.PerMillion(), e.FixedPerMonth(), e.PerMonth())
	tw.Flush()
	fmt.Fprintf(out, "all-in per million pages at this rate: $%.3f\n", e.AllInPerMillion())
}
