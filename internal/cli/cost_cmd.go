package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"text/tabwriter"

	"crawlq/internal/cost"
)

// costFlags names the flag of each cost.Inputs field, so a range error names what the user typed.
var costFlags = map[string]string{
	"PagesPerMonth": "--pages-per-month", "PageKB": "--page-kb", "Queues": "--queues", "Spiders": "--spiders",
	"ItemBytes": "--item-bytes", "RetentionMonths": "--retention-months", "LogBytesPerPage": "--log-bytes-per-page",
	"Runtime": "--runtime",
}

// costCmd is `crawlq cost`: the cost model of internal/cost, printed term by term.
func costCmd() *Command {
	return &Command{
		Name: "cost", Synopsis: "the whole AWS bill of the stack, term by term: per million pages, per month, all-in",
		Usage: "[--pages-per-month 100000000] [--page-kb 100] [--queues 2] [--spiders 10] [--item-bytes 1000] [--retention-months 1] [--runtime ecs|lambda] [--var name=value ...]",
		Help: `Prints every term of the bill of the stack terraform/ deploys, from us-east-1 list prices that are named constants in internal/cost with their source page and the
date they were read (no free tier counted). Each term is either per
million pages (it grows with pages: compute, the runners' public IPv4, outbound traffic,
fetched bytes through NAT, cross-AZ traffic to the database (and RDS Proxy), logs, items kept
for --retention-months) or fixed per month (NAT, RDS instance, storage and Proxy, CloudWatch
metrics, dashboard, alarms and logs, the minute ticks, KMS, Secrets Manager, ECR). Then the
month's bill at --pages-per-month, the all-in cost of a million pages (fixed costs shared out
over the month's pages) and the monthly volume from which a million pages cost at most $1
all-in. The crawl rates per task and per worker, and the traffic per page, are assumptions
written in internal/cost; measure yours.

--var name=value (repeatable) prices the stack terraform/ deploys with that variable, as
` + "`crawlq deploy --var`" + ` passes it (nat, db_proxy, runner_items_to_s3, db_instance_class,
az_count, container_insights, crawl_concurrency, runner_cpu, ...); a variable the model does not price is
refused by name, and the priced variables' defaults are held to terraform/variables.tf by a test.
docs/cost.md lists them and what each saving gives up.

--runtime ecs prices crawl jobs on the Fargate Spot runners (the default: a NAT instance, no
RDS Proxy, items to S3), lambda on worker Lambdas behind a NAT gateway and RDS Proxy (items to
S3): the same as --var crawl_runtime=fargate or lambda. docs/cost.md has the bill of each, the
variables, and what each saving gives up in reliability.`,
		Flags: func(fs *flag.FlagSet, env *Env) func(context.Context, []string) error {
			d := cost.DefaultInputs()
			perMonth := fs.Float64("pages-per-month", d.PagesPerMonth, "pages crawled per month (1000 to 1e12)")
			pageKB := fs.Float64("page-kb", d.PageKB, "average fetched page size in KB (0.1 to 100000)")
			queues := fs.Int("queues", d.Queues, "queues (crawlq writes 7 metrics per queue; 1 to 1000)")
			spiders := fs.Int("spiders", d.Spiders, "spiders that run in a month (13 metrics each with --var metrics_per_spider=true; 1 to 100000)")
			itemBytes := fs.Float64("item-bytes", d.ItemBytes, "item bytes stored per page (0 to 1e8)")
			retention := fs.Float64("retention-months", d.RetentionMonths, "months items are kept (0 to 1200; in S3 by default, where the bucket keeps them until deleted)")
			logBytes := fs.Float64("log-bytes-per-page", d.LogBytesPerPage, "log bytes written per page (0 to 1e7)")
			runtime := fs.String("runtime", string(d.Runtime), "where crawl jobs run: ecs (Fargate Spot runners) or lambda (worker Lambdas)")
			vars := kvFlag{}
			fs.Var(vars, "var", "a Terraform variable name=value the stack is deployed with (repeatable)")
			return func(ctx context.Context, args []string) error {
				in := cost.Inputs{PagesPerMonth: *perMonth, PageKB: *pageKB, Queues: *queues, Spiders: *spiders,
					ItemBytes: *itemBytes, RetentionMonths: *retention, LogBytesPerPage: *logBytes, Runtime: cost.Runtime(*runtime)}
				if err := in.Validate(); err != nil {
					return usageErr("%s", flagNamed(err))
				}
				tfRuntime := map[cost.Runtime]string{cost.ECS: "fargate", cost.Lambda: "lambda"}[in.Runtime]
				if v, ok := vars["crawl_runtime"]; ok && v != tfRuntime && runtimeSet(fs) {
					return usageErr("--runtime %s and --var crawl_runtime=%s disagree", in.Runtime, v)
				} else if ok {
					in.Runtime = map[string]cost.Runtime{"fargate": cost.ECS, "lambda": cost.Lambda}[v]
				} else if in.Runtime != cost.ECS {
					vars["crawl_runtime"] = tfRuntime
				}
				deployed, err := cost.StackFor(vars)
				if err != nil {
					return usageErr("--var: %s", flagNamed(err))
				}
				fmt.Fprintf(env.Stdout, "crawlq on AWS: %.0f pages/month of %g KB, %d queues, %d spiders, %g B of items per page kept %g months, %g log B/page, crawling on %s.\nus-east-1 list prices read %s, no free tier.\n",
					in.PagesPerMonth, in.PageKB, in.Queues, in.Spiders, in.ItemBytes, in.RetentionMonths, in.LogBytesPerPage, in.Runtime, cost.PricesDate)
				e, err := cost.Compute(deployed, in)
				if err != nil {
					return usageErr("%s", flagNamed(err))
				}
				printEstimate(env.Stdout, e)
				return nil
			}
		},
	}
}

// runtimeSet reports whether --runtime was given.
func runtimeSet(fs *flag.FlagSet) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == "runtime" })
	return set
}

// flagNamed rewrites the cost.Inputs field names in err as the flags that set them.
func flagNamed(err error) string {
	var msgs []string
	var walk func(error)
	walk = func(err error) {
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
			return
		}
		var ie *cost.InputError
		if errors.As(err, &ie) {
			msgs = append(msgs, costFlags[ie.Field]+": "+ie.Msg)
			return
		}
		msgs = append(msgs, err.Error())
	}
	walk(err)
	out := ""
	for i, m := range msgs {
		if i > 0 {
			out += "; "
		}
		out += m
	}
	return out
}

func printEstimate(out io.Writer, e cost.Estimate) {
	fmt.Fprintf(out, "\ntopology %s\n", e.Stack.Name)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "term\tper million pages\tfixed/month\tat this volume/month\thow")
	for _, t := range e.Terms {
		fmt.Fprintf(tw, "%s\t$%.4f\t$%.2f\t$%.2f\t%s\n", t.Name, t.PerMillion, t.FixedPerMonth, t.FixedPerMonth+t.PerMillion*e.Inputs.PagesPerMonth/1e6, t.Basis)
	}
	fmt.Fprintf(tw, "total\t$%.4f\t$%.2f\t$%.2f\t\n", e.PerMillion(), e.FixedPerMonth(), e.PerMonth())
	tw.Flush()
	fmt.Fprintf(out, "all-in per million pages at %.0f pages/month: $%.3f\n", e.Inputs.PagesPerMonth, e.AllInPerMillion())
	if v := e.PagesPerMonthFor(1); math.IsInf(v, 1) {
		fmt.Fprintf(out, "$1 per million pages all-in: never (the per-page cost alone is $%.3f)\n", e.PerMillion())
	} else {
		fmt.Fprintf(out, "$1 per million pages all-in: from %.0f million pages/month\n", math.Ceil(v/1e6))
	}
	if !e.Stack.ItemsToS3ForECS && e.Inputs.Runtime == cost.ECS {
		maxGB := 4 * e.Stack.DBStorageGB // terraform: max_allocated_storage = 4 x db_allocated_storage
		fmt.Fprintf(out, "items: +%.1f GB a month in Postgres; nothing deletes them, and RDS storage autoscaling stops at %.0f GB", e.ItemsGBPerMonth, maxGB)
		if e.ItemsGBPerMonth > 0 {
			fmt.Fprintf(out, " (%.1f months of crawling at this volume)", maxGB/e.ItemsGBPerMonth)
		}
		fmt.Fprintln(out)
	}
}
