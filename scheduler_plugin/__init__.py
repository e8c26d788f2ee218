"""scheduler_plugin"""
