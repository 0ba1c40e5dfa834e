-- nothing here;

