# Storage: the stack's two S3 buckets, each private, encrypted and TLS only: items (what crawls
# scrape) and code (the functions' zips, which Lambda reads when a function is created or its
# code changes). The code has a bucket of its own because the worker may write anywhere in the
# items bucket: code there would let a worker change what migrate, the master user's function,
# runs.

variable "name" {
  description = "Name prefix."
  type        = string
}

variable "account" {
  description = "AWS account ID; bucket names are global, so it goes into the name."
  type        = string
}

resource "aws_s3_bucket" "items" {
  bucket = "${var.name}-items-${var.account}"
  # Destroy deletes the items with the bucket (every version: the bucket is versioned, so
  # nothing else could empty it); `crawlq destroy` says so and asks for --yes. Copy what you
  # keep first (aws s3 sync s3://BUCKET DIR).
  force_destroy = true
}

# Each deploy uploads the zips anew under keys named by their content (modules/functions), and
# they are rebuilt from the source: destroy deletes whatever the bucket holds.
resource "aws_s3_bucket" "code" {
  bucket        = "${var.name}-code-${var.account}"
  force_destroy = true
}

locals {
  buckets = {
    items = aws_s3_bucket.items
    code  = aws_s3_bucket.code
  }
}

resource "aws_s3_bucket_public_access_block" "bucket" {
  for_each                = local.buckets
  bucket                  = each.value.id
  block_public_acls       = true
  block_public_policy     = true
  ignore_public_acls      = true
  restrict_public_buckets = true
}

resource "aws_s3_bucket_ownership_controls" "bucket" {
  for_each = local.buckets
  bucket   = each.value.id
  rule {
    object_ownership = "BucketOwnerEnforced"
  }
}

resource "aws_s3_bucket_server_side_encryption_configuration" "bucket" {
  for_each = local.buckets
  bucket   = each.value.id
  rule {
    apply_server_side_encryption_by_default {
      sse_algorithm = "AES256"
    }
  }
}

moved {
  from = aws_s3_bucket_public_access_block.items
  to   = aws_s3_bucket_public_access_block.bucket["items"]
}

moved {
  from = aws_s3_bucket_ownership_controls.items
  to   = aws_s3_bucket_ownership_controls.bucket["items"]
}

moved {
  from = aws_s3_bucket_server_side_encryption_configuration.items
  to   = aws_s3_bucket_server_side_encryption_configuration.bucket["items"]
}

resource "aws_s3_bucket_versioning" "items" {
  bucket = aws_s3_bucket.items.id
  versioning_configuration {
    status = "Enabled"
  }
}

variable "noncurrent_days" {
  description = "Days an overwritten or deleted item version is kept before it expires."
  type        = number
}

# Versioning guards items against an overwrite or delete by mistake; old versions expire after
# var.noncurrent_days so the bucket does not grow forever, and failed multipart uploads go too.
resource "aws_s3_bucket_lifecycle_configuration" "items" {
  bucket = aws_s3_bucket.items.id

  rule {
    id     = "expire-noncurrent-versions"
    status = "Enabled"
    filter {}
    noncurrent_version_expiration {
      noncurrent_days = var.noncurrent_days
    }
    abort_incomplete_multipart_upload {
      days_after_initiation = 7
    }
  }
  # Answers the api function kept for a redirect (a log or items feed over its function URL's
  # 6 MB): their links last 15 minutes, the objects a day.
  rule {
    id     = "expire-scrapyd-answers"
    status = "Enabled"
    filter {
      prefix = "scrapyd-answers/"
    }
    expiration {
      days = 1
    }
  }
  rule {
    id     = "remove-expired-delete-markers"
    status = "Enabled"
    filter {}
    expiration {
      expired_object_delete_marker = true
    }
  }

  depends_on = [aws_s3_bucket_versioning.items]
}

variable "emulator_workarounds" {
  description = "Leave out the code bucket's policy (see the root module's variable)."
  type        = bool
}

data "aws_iam_policy_document" "tls_only" {
  for_each = local.buckets
  # A Deny, so s3:* here grants nothing: it refuses every request that is not over TLS.
  statement {
    sid     = "DenyInsecureTransport"
    effect  = "Deny"
    actions = ["s3:*"]
    resources = [
      each.value.arn,
      "${each.value.arn}/*",
    ]
    principals {
      type        = "*"
      identifiers = ["*"]
    }
    condition {
      test     = "Bool"
      variable = "aws:SecureTransport"
      values   = ["false"]
    }
  }
}

resource "aws_s3_bucket_policy" "bucket" {
  for_each = var.emulator_workarounds ? { items = aws_s3_bucket.items } : local.buckets
  bucket   = each.value.id
  policy   = data.aws_iam_policy_document.tls_only[each.key].json

  depends_on = [aws_s3_bucket_public_access_block.bucket]
}

moved {
  from = aws_s3_bucket_policy.items
  to   = aws_s3_bucket_policy.bucket["items"]
}

output "bucket" {
  value = aws_s3_bucket.items.id
}

output "bucket_arn" {
  value = aws_s3_bucket.items.arn
}

output "code_bucket" {
  value = aws_s3_bucket.code.id
}
