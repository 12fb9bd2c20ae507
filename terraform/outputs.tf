output "function_names" {
  description = "Lambda function names by role (api, worker, dispatch, metrics)."
  value       = module.functions.names
}

output "api_function_arn" {
  description = "ARN of the api function (what `aws lambda invoke` and user schedules call)."
  value       = module.functions.arns["api"]
}

output "dashboard_url" {
  description = "CloudWatch dashboard."
  value       = module.observability.dashboard_url
}

output "alarm_topic_arn" {
  description = "SNS topic the alarms notify."
  value       = module.observability.topic_arn
}

output "ecs_cluster" {
  description = "ECS cluster running the runner tasks."
  value       = module.ecs.cluster_name
}

output "ecr_repository_url" {
  description = "ECR repository to push the runner image to (tag var.image_tag)."
  value       = module.ecs.repository_url
}

output "items_bucket" {
  description = "S3 bucket for items."
  value       = module.storage.bucket
}

output "database_endpoint" {
  description = "Where the functions and runners connect (IAM auth): RDS Proxy's endpoint, or the instance's address without the proxy (db_proxy)."
  value       = module.database.endpoint
}

output "database_instance_endpoint" {
  description = "RDS instance address (reachable only from the proxy, or without it from the functions and runners)."
  value       = module.database.instance_address
}

output "database_secret_arn" {
  description = "Secrets Manager secret holding the master credentials (managed by RDS; the proxy reads it, or without it the migrate function)."
  value       = module.database.secret_arn
}

output "schedule_group" {
  description = "EventBridge Scheduler group for recurring spider runs."
  value       = module.scheduler.group_name
}

output "final_snapshot" {
  description = "The DB snapshot RDS keeps when the stack is destroyed (empty with db_skip_final_snapshot); crawlq destroy names it."
  value       = module.database.final_snapshot
}
