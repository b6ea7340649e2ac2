-- The start of the window that `p_now` falls in.
CREATE OR REPLACE FUNCTION policy_window_start(p_kind text, p_seconds integer, p_now timestamptz)
RETURNS timestamptz LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE p_kind
    WHEN 'day' THEN date_trunc('day', p_now AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'
    WHEN 'week' THEN date_trunc('week', p_now AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'
    WHEN 'month' THEN date_trunc('month', p_now AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'
    WHEN 'interval' THEN to_timestamp(floor(extract(epoch FROM p_now) / p_seconds) * p_seconds)
    ELSE 'epoch'::timestamptz
  END
$$;
