# The functions' code: each zip uploaded to the code bucket, which the functions are created
# from. From S3 rather than from a local file (`filename`) because the AWS provider creates
# functions built from a local file one at a time (it holds a lock while it reads one into
# memory and until the function is active), while those built from S3 are created side by side;
# and the uploads need nothing of the database, so they run while it is being created and the
# functions start the moment it exists.
#
# The key is the zip's SHA-256, so a changed zip is a new object and a new s3_key, which updates
# the function's code (source_code_hash says the same to the provider); the new object is
# uploaded before the old one is deleted, so the state never names a key that is gone.

locals {
  zips = { for fn in local.functions : fn => "${var.build_dir}/${fn}.zip" }
}

resource "aws_s3_object" "code" {
  for_each     = local.zips
  bucket       = var.code_bucket
  key          = "functions/${each.key}/${filesha256(each.value)}.zip"
  source       = each.value
  content_type = "application/zip"

  lifecycle {
    create_before_destroy = true
  }
}
