package envconfig

import (
	"errors"

	"crawlq/internal/scrapyd"
)

// Scrapyd reads where the Scrapyd API's basic auth credentials come from: the secret
// CRAWLQ_SCRAPYD_SECRET_ARN, else CRAWLQ_SCRAPYD_USERNAME and CRAWLQ_SCRAPYD_PASSWORD (both or
// neither); none of them: no auth.
func Scrapyd(env Env) (scrapyd.CredentialSource, error) {
	src := scrapyd.CredentialSource{SecretARN: env.String("CRAWLQ_SCRAPYD_SECRET_ARN"),
		Username: env.Getenv("CRAWLQ_SCRAPYD_USERNAME"), Password: env.Getenv("CRAWLQ_SCRAPYD_PASSWORD")}
	if src.SecretARN == "" && (src.Username == "") != (src.Password == "") {
		return scrapyd.CredentialSource{}, errors.New("set both CRAWLQ_SCRAPYD_USERNAME and CRAWLQ_SCRAPYD_PASSWORD, or neither")
	}
	return src, nil
}
