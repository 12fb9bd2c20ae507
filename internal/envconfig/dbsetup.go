package envconfig

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"crawlq/internal/db"
	"crawlq/internal/dbsetup"
)

// MigrateMaxConns is the migrate step's pool size when CRAWLQ_DB_MAX_CONNS does not set it: it
// runs one migration at a time.
const MigrateMaxConns = 2

// DBSetup builds the migrate function's config from its environment (terraform/main.tf): the
// database variables of DB (CRAWLQ_DB_USER is the master user there),
// CRAWLQ_DB_APP_USER (default DefaultAppRole), and either CRAWLQ_DB_APP_SECRET_ARN, the
// application role's secret, or CRAWLQ_DB_APP_IAM=true, its IAM login (neither: the role's
// login is left alone). It opens the pool: MigrateMaxConns connections unless
// CRAWLQ_DB_MAX_CONNS says otherwise.
func DBSetup(ctx context.Context, env Env, awsCfg aws.Config) (dbsetup.Config, error) {
	dc, err := DB(ctx, env, awsCfg, MigrateMaxConns)
	if err != nil {
		return dbsetup.Config{}, err
	}
	appIAM, err := env.Bool("CRAWLQ_DB_APP_IAM", false)
	if err != nil {
		return dbsetup.Config{}, err
	}
	arn := env.String("CRAWLQ_DB_APP_SECRET_ARN")
	if appIAM && arn != "" {
		return dbsetup.Config{}, Errorf("CRAWLQ_DB_APP_IAM", "true with CRAWLQ_DB_APP_SECRET_ARN set: the role logs in with IAM tokens or a password, not both")
	}
	dc.AppName = "crawlq-migrate"
	pool, err := db.Open(ctx, dc)
	if err != nil {
		return dbsetup.Config{}, err
	}
	cfg := dbsetup.Config{Pool: pool, AppRole: env.String("CRAWLQ_DB_APP_USER"), AppIAM: appIAM}
	if arn != "" {
		sm := secretsmanager.NewFromConfig(awsCfg)
		role := cfg.AppRole
		if role == "" {
			role = dbsetup.DefaultAppRole
		}
		cfg.AppPassword = func(ctx context.Context) (string, error) {
			user, pw, err := db.ReadCredentials(ctx, sm, arn)
			if err != nil {
				return "", err
			}
			if user != "" && user != role {
				return "", fmt.Errorf("%w: CRAWLQ_DB_APP_SECRET_ARN holds user %q, want %q (CRAWLQ_DB_APP_USER)", dbsetup.ErrConfig, user, role)
			}
			return pw, nil
		}
	}
	return cfg, nil
}
