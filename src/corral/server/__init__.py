"""The server side of corral: API keys and tenants, tenant quotas."""
