package cli

import "crawlq/internal/lambdafn"

// localEventBus picks `crawlq local`'s event bus: the flag, else $CRAWLQ_EVENT_BUS, else the
// emulator's default bus when AWS_ENDPOINT_URL names one, else off (a laptop without an emulator
// has no EventBridge to publish to, and retrying against AWS every tick would only fill the log).
func localEventBus(flag string, getenv func(string) string) string {
	switch {
	case flag != "":
		return flag
	case getenv("CRAWLQ_EVENT_BUS") != "":
		return getenv("CRAWLQ_EVENT_BUS")
	case getenv("AWS_ENDPOINT_URL") != "":
		return "default"
	}
	return lambdafn.EventsOff
}
