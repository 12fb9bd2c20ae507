terraform {
  required_version = ">= 1.6"

  required_providers {
    aws = {
      source = "hashicorp/aws"
      # Pinned exactly: the offline mirror holds this version, and the emulator tests were run against it.
      version = "5.100.0"
    }
  }

  # Local state by default; `crawlq deploy` points it at its work directory with
  # -backend-config=path=... . Teams sharing a stack should switch this to an "s3" backend.
  backend "local" {}
}
